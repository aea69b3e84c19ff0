"""Many-to-many tokenizers (M2M100; NLLB's follow the same rule): a language token starts every source
and every target, so one model translates between any pair of its languages.

    source  = __de__ x_1 .. x_n </s>       (qkvmt.model.inputs adds </s>)
    target  = </s> __en__ y_1 .. y_m       (the decoder starts with </s>; search forces __en__ first)

`ManyToMany` wraps the tokenizer that cuts text and puts the source's language first; `target` puts the
target's. The target language reaches the search as DecodeConfig.forced_first_id (`decode_settings`).
M2M100 numbers its language tokens after vocab.json (qkvmt.hf.m2m100), in the order its
tokenizer_config.json (or special_tokens_map.json) lists them as additional special tokens; NLLB's
tokenizer.json holds its own (deu_Latn, ...), which its tokenizer_config.json lists likewise (a list-less
NllbTokenizer's are NLLB's whole table, as transformers takes them).
"""

import re
from dataclasses import replace
from pathlib import Path

from qkvmt.errors import UserError, optional_import
from qkvmt.hf.json_files import read_json, shown, token_text
from qkvmt.hf.piece_vocabulary import Encoding, PieceVocabulary

# A language's token: fairseq's and M2M100's __de__ (the code inside), or NLLB's deu_Latn (the token is the code).
LANGUAGE_TOKEN = re.compile(r"^__(\w+)__$|^([a-z]{3}_[A-Z][a-z]{3})$")


class ManyToMany:
    """`base` (a PieceVocabulary, numbering `languages` after its own tokens) with the language token of
    `src_lang` before every text it encodes; `target` encodes with `tgt_lang`'s. Every other method is the base's."""

    def __init__(self, base: PieceVocabulary, languages: dict[str, int], src_lang: str | None, tgt_lang: str | None):
        self.base, self.languages = base, languages
        self.src_lang, self.tgt_lang = src_lang, tgt_lang

    def __getattr__(self, name: str):  # decode, id_to_token, get_vocab, ...: the base's
        if name == "base":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.base, name)

    def language_id(self, lang: str | None, role: str = "tgt_lang") -> int:
        """The id of language `lang`'s token; a UserError naming `role` when there is none."""
        if lang not in self.languages:
            known = ", ".join(sorted(self.languages)[:12]) + (", ..." if len(self.languages) > 12 else "")
            what = f"{role}={lang!r} is not one of its languages" if lang else f"it needs {role}="
            raise UserError(f"a many-to-many model: {what} ({known})")
        return self.languages[lang]

    @property
    def encode_special_tokens(self) -> bool:
        return self.base.encode_special_tokens

    @encode_special_tokens.setter
    def encode_special_tokens(self, value: bool) -> None:  # qkvmt.text.tokenizer.encode sets it on the base
        self.base.encode_special_tokens = value

    def encode_batch(self, texts: list[str], add_special_tokens: bool = False) -> list[Encoding]:
        first = self.language_id(self.src_lang, "src_lang")
        return [Encoding([first, *e.ids]) for e in self.base.encode_batch(texts, add_special_tokens=False)]

    @property
    def target(self) -> "ManyToMany":
        """The tokenizer of target text: the target's language token first."""
        return ManyToMany(getattr(self.base, "target", self.base), self.languages, self.tgt_lang, self.tgt_lang)

    def with_languages(self, src_lang: str | None, tgt_lang: str | None) -> "ManyToMany":
        """This tokenizer for another pair (None keeps a side's language); both are checked."""
        out = ManyToMany(self.base, self.languages, src_lang or self.src_lang, tgt_lang or self.tgt_lang)
        out.language_id(out.src_lang, "src_lang"), out.language_id(out.tgt_lang, "tgt_lang")
        return out


def tokenizer_json_languages(tokenizer, folder: Path, config: dict):
    """A tokenizer.json's tokenizer (a `tokenizers.Tokenizer`), as a ManyToMany where its configuration lists
    language tokens it holds (NLLB's), or is NllbTokenizer's and lists none; else as it is."""
    listed = language_tokens(folder, config) or nllb_languages(config)
    languages = {code: tokenizer.token_to_id(token) for code, token in listed}
    languages = {code: i for code, i in languages.items() if i is not None}
    return ManyToMany(tokenizer, languages, config.get("src_lang"), config.get("tgt_lang")) if languages else tokenizer


def nllb_languages(config: dict) -> list[tuple[str, str]]:
    """NLLB's languages where tokenizer_config.json names NllbTokenizer and lists none: transformers'
    NllbTokenizer then takes its own table of them as its special tokens."""
    if config.get("tokenizer_class") not in ("NllbTokenizer", "NllbTokenizerFast"):
        return []
    return [(code, code) for code in transformers_languages("nllb.tokenization_nllb", "NLLB")]


def transformers_languages(module: str, family: str):
    """The table of language codes transformers' tokenizer of `family` keeps (FAIRSEQ_LANGUAGE_CODES of
    transformers.models.`module`), which a folder that lists no languages takes, as that tokenizer does."""
    tables = optional_import(
        f"transformers.models.{module}",
        f"pip install transformers (or pip install -e '.[hf]' in qkvmt's folder), which holds {family}'s languages",
        "transformers",
    )
    return tables.FAIRSEQ_LANGUAGE_CODES


def language_tokens(folder: Path, config: dict) -> list[tuple[str, str]]:
    """(code, token) of each language token among the special tokens the folder lists, in order."""
    matches = (LANGUAGE_TOKEN.match(token) for token in listed_specials(folder, config))
    return [(m.group(1) or m.group(2), m.group(0)) for m in matches if m]


def listed_specials(folder: Path, config: dict) -> list[str]:
    """The additional special tokens tokenizer_config.json or special_tokens_map.json lists, in order."""
    listed = config.get("additional_special_tokens") or config.get("extra_special_tokens") or []
    path = folder / "special_tokens_map.json"
    if not listed and path.is_file():
        listed = read_json(path).get("additional_special_tokens", [])
    where = path.with_name("tokenizer_config.json")
    if not isinstance(listed, list):
        raise UserError(f"{where}: additional_special_tokens={shown(listed)} is not a list")
    return [token_text(where, "additional_special_tokens", t) for t in listed]


def for_pair(tokenizer, meta, src_lang: str | None = None, tgt_lang: str | None = None):
    """The tokenizer and checkpoint metadata of a many-to-many model set to translate src_lang -> tgt_lang
    (each, where not given, the one its folder names), the target language forced first in every search;
    any other model's as they are, refusing a pair other than its own."""
    if not isinstance(tokenizer, ManyToMany):
        other = [
            f"{k}={v!r}"
            for k, v, own in (("src_lang", src_lang, meta.src_lang), ("tgt_lang", tgt_lang, meta.tgt_lang))
            if v and v != own
        ]
        if other:
            raise UserError(f"{', '.join(other)}: this model translates {meta.src_lang}->{meta.tgt_lang} only")
        return tokenizer, meta
    tok = tokenizer.with_languages(src_lang, tgt_lang)
    decode = meta.decode | {"forced_first_id": tok.language_id(tok.tgt_lang)}
    return tok, replace(meta, src_lang=tok.src_lang, tgt_lang=tok.tgt_lang, decode=decode)
