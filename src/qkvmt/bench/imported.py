"""The benchmark's imported-model stage: a Hugging Face Marian folder of OPUS-MT-base's shape (by
default 6+6 layers, d_model 512, 8 heads, FFN 2048, opus-mt-de-en's 58,101-token vocabulary) made here,
with transformers' own random initialisation (time and memory do not depend on the weights' values)
and SentencePiece models trained on the training split, then opened by qkvmt:

- load: `qkvmt.load` in a fresh process (Linux: it reads /proc), in seconds with every import it makes and
  without them, and the growth of its resident memory at its peak over the size of the weights file;
- beam search with the folder's generation settings (beam 5, transformers' length rule), ours
  against transformers' `generate` on the same validation sentences, and how many are identical;
- the model qkvmt opened, exported by qkvmt's own exporter to CTranslate2 float32, translating the same
  sentences with the same settings but CTranslate2's stopping rule (early_stopping, the one setting it
  cannot take from the folder), against ours with that rule: seconds of each and how many are identical;
- the explorer (qkvmt.explore.session, as the server calls it, JSON included) on validation sentences
  of about 20 words: each one's first view, an intervention with its re-decode (values of two source
  tokens swapped in every cross-attention layer), and its layers panel (`lens`); and on the first of
  them, each signal the first view leaves out, as the page asks for it when it is chosen.

Needs transformers and sentencepiece (pip install -e '.[hf]').
"""

import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from qkvmt.bench.timing import time_call, time_in_turns
from qkvmt.errors import UserError, optional_import
from qkvmt.export.ctranslate2_engine import load_ctranslate2
from qkvmt.export.to_ctranslate2 import export_ctranslate2, require_ctranslate2
from qkvmt.host.process_memory import MB, peak_resident_bytes, resident_bytes

INSTALL = "pip install -e '.[hf]' in qkvmt's folder (transformers and sentencepiece)"


def marian_folder(cfg, train: tuple[list[str], list[str]], langs: tuple[str, str], folder: Path) -> Path:
    """A Marian folder of the shape `cfg` gives (the benchmark's `imported`), translating langs[0] ->
    langs[1]: SentencePiece models of at most cfg.spm_vocab pieces trained on the first cfg.spm_lines lines of
    each side of `train`, vocab.json numbered as Marian's converter numbers it (</s> 0, <unk> 1, the
    pieces of both models, fillers up to cfg.vocab_size, <pad> last) and random weights."""
    spm = optional_import("sentencepiece", INSTALL)
    transformers = optional_import("transformers", INSTALL)
    transformers.utils.logging.disable_progress_bar()  # the benchmark's log says what it does
    folder.mkdir(parents=True, exist_ok=True)
    pieces = []
    for name, lines in zip(("source.spm", "target.spm"), train):
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines[: cfg.spm_lines]),
            model_writer=model,
            vocab_size=cfg.spm_vocab,
            hard_vocab_limit=False,  # at most: a small corpus may hold fewer pieces
            model_type="unigram",
            minloglevel=2,
        )
        (folder / name).write_bytes(model.getvalue())
        proc = spm.SentencePieceProcessor(model_proto=model.getvalue())
        pieces += [proc.id_to_piece(i) for i in range(proc.get_piece_size())]
    names = ["</s>", "<unk>"] + [p for p in dict.fromkeys(pieces) if p not in ("<s>", "</s>", "<unk>")]
    if len(names) >= cfg.vocab_size:
        raise UserError(f"imported.vocab_size={cfg.vocab_size}: the two SentencePiece models have {len(names)} pieces")
    names += [f"▁filler{i}" for i in range(cfg.vocab_size - 1 - len(names))] + ["<pad>"]
    (folder / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(names)}), encoding="utf-8")
    tc = {"source_lang": langs[0], "target_lang": langs[1], "separate_vocabs": False}
    (folder / "tokenizer_config.json").write_text(json.dumps(tc | {"tokenizer_class": "MarianTokenizer"}))
    pad = cfg.vocab_size - 1
    config = transformers.MarianConfig(
        vocab_size=cfg.vocab_size,
        pad_token_id=pad,
        decoder_start_token_id=pad,
        eos_token_id=0,
        d_model=cfg.d_model,
        encoder_layers=cfg.layers,
        decoder_layers=cfg.layers,
        encoder_attention_heads=cfg.heads,
        decoder_attention_heads=cfg.heads,
        encoder_ffn_dim=cfg.ffn_dim,
        decoder_ffn_dim=cfg.ffn_dim,
        max_position_embeddings=512,
        activation_function="swish",
    )
    torch.manual_seed(0)
    hf = transformers.MarianMTModel(config).eval()
    generation = dict(num_beams=5, max_length=cfg.max_length, bad_words_ids=[[pad]], forced_eos_token_id=0)
    for key, value in generation.items():
        setattr(hf.generation_config, key, value)
    hf.save_pretrained(str(folder))
    return folder


# What a user's script does, timed from its first line: qkvmt.load imports torch and the rest as it goes.
TIME_LOAD = (
    "import time; start = time.perf_counter(); import sys, qkvmt; qkvmt.load(sys.argv[1], device='cpu'); "
    "print(time.perf_counter() - start)"
)


def load_in_fresh_process(folder: Path) -> dict:
    """qkvmt.load of `folder` in fresh processes: one timed from its first line, every import included
    (load_s), one measuring memory (`python -m qkvmt.bench.imported FOLDER`, whose own imports come first)."""
    timed = subprocess.run([sys.executable, "-c", TIME_LOAD, str(folder)], capture_output=True, text=True)
    measured = subprocess.run([sys.executable, "-m", __name__, str(folder)], capture_output=True, text=True)
    for done in (timed, measured):
        if done.returncode:
            raise RuntimeError(f"loading {folder} in a fresh process failed:\n{done.stderr[-2000:]}")
    load_s = float(timed.stdout.strip().splitlines()[-1])
    return {"load_s": load_s} | json.loads(measured.stdout.strip().splitlines()[-1])


def _measure_load(folder: Path) -> dict:
    import qkvmt

    with open("/proc/self/clear_refs", "w") as f:  # the high-water mark from here on: reset to the resident set now
        f.write("5")
    before = resident_bytes() / MB
    start = time.perf_counter()
    qkvmt.load(folder, device="cpu")
    seconds = time.perf_counter() - start
    peak = peak_resident_bytes() / MB
    weights = sum(f.stat().st_size for f in folder.glob("*.safetensors")) / MB
    return {
        "load_after_imports_s": seconds,  # qkvmt.api and what it imports, imported here, included
        "weights_mib": weights,
        "peak_growth_mib": peak - before,
        "peak_vs_weights": (peak - before) / weights,
    }


def imported_speed(cfg, folder: Path, val: tuple[list[str], list[str]]) -> dict:
    """Every figure of the stage on the folder made by `marian_folder` (see the module's docstring)."""
    import qkvmt
    from qkvmt.analysis.signals import SIGNALS
    from qkvmt.explore.lazy_signals import FIRST
    from qkvmt.explore.session import Explorer

    transformers = optional_import("transformers", INSTALL)
    out = {"shape": {k: cfg[k] for k in ("d_model", "layers", "heads", "ffn_dim", "vocab_size")}}
    out["load"] = load_in_fresh_process(folder)
    model = qkvmt.load(folder, device="cpu")
    sources = val[0][: cfg.sentences]
    hf = transformers.MarianMTModel.from_pretrained(str(folder)).eval()
    tok = transformers.MarianTokenizer.from_pretrained(str(folder))

    def generate():
        with torch.inference_mode():
            return tok.batch_decode(
                hf.generate(**tok(sources, return_tensors="pt", padding=True)), skip_special_tokens=True
            )

    cpu = torch.device("cpu")
    ours_s, ours = time_call(lambda: model.translate(sources), cpu, cfg.repeats)
    hf_s, theirs = time_call(generate, cpu, cfg.repeats)
    out["decode"] = {
        "sentences": len(sources),
        "settings": model.meta.decode,
        "ours_s": ours_s,
        "hf_s": hf_s,
        "ours_vs_hf": hf_s / ours_s,
        "identical": sum(a == b for a, b in zip(ours, theirs)),
    }
    out["ctranslate2"] = ctranslate2_float32(model, sources, cfg.repeats)
    low, high = cfg.explorer_words
    long = [s for s in val[0] if low <= len(s.split()) <= high][: cfg.explorer_sentences]
    if not long:
        raise UserError(f"imported.explorer_words=[{low},{high}]: no validation sentence has that many words")
    explorer, views = Explorer(model), []
    for source in long:
        swap = {"source": source, "edit": "swap", "what": "values", "kind": "cross", "layer": None, "a": 0, "b": 1}
        views.append(
            {
                "words": len(source.split()),
                "first_view_s": _seconds(lambda: json.dumps(explorer.sentence({"source": source}))),
                "intervention_s": _seconds(lambda: json.dumps(explorer.intervene(swap))),
                "lens_s": _seconds(lambda: json.dumps(explorer.lens({"source": source}))),
            }
        )
    later = [name for name in SIGNALS if name not in FIRST]  # each computed when chosen, on the first sentence
    asked = {name: _seconds(lambda n=name: explorer.signal({"source": long[0], "signal": n})) for name in later}
    out["explorer"] = {
        "sentences": views,
        "signal_s": asked,
        **{f"{k}_median": statistics.median(v[k] for v in views) for k in ("first_view_s", "intervention_s", "lens_s")},
        **{f"{k}_max": max(v[k] for v in views) for k in ("first_view_s", "intervention_s", "lens_s")},
    }
    return out


def ctranslate2_float32(model, sources: list[str], repeats: int) -> dict:
    """`model` exported to CTranslate2 float32 (qkvmt's exporter, into a folder that lasts the call) against
    ours, taking turns call by call (median of `repeats` after a warm-up), on `sources` with the model's
    settings and CTranslate2's stopping rule (early_stopping=true; it refuses transformers' false): what
    CTranslate2 can decode of the folder's settings. Where ctranslate2 is not installed, why."""
    try:
        ctranslate2 = require_ctranslate2()
    except UserError as e:
        return {"ctranslate2_missing": str(e)}
    cpu, settings = torch.device("cpu"), model.decoding(early_stopping=True)
    with tempfile.TemporaryDirectory() as folder:
        export_ctranslate2(model.transformer, model.tokenizer, model.meta, Path(folder))
        engine = load_ctranslate2(folder, compute_type="float32", threads=torch.get_num_threads())
        last = {}  # each one's translations; the two take turns, so a neighbour's load touches both alike
        runs = {"ours": model, "ct2": engine}
        turns = {k: lambda k=k: last.__setitem__(k, list(runs[k].translate(sources, settings))) for k in runs}
        seconds = time_in_turns(turns, cpu, repeats)
    ours_s, ct2_s, ours, theirs = seconds["ours"], seconds["ct2"], last["ours"], last["ct2"]
    return {
        "settings": {"early_stopping": True},
        "ours_s": ours_s,
        "ct2_float32_s": ct2_s,
        "ours_sent_s": len(sources) / ours_s,
        "ct2_float32_sent_s": len(sources) / ct2_s,
        "ours_vs_ct2_float32": ct2_s / ours_s,
        "identical": sum(a == b for a, b in zip(ours, theirs)),
        "ctranslate2_version": ctranslate2.__version__,
    }


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    print(json.dumps(_measure_load(Path(sys.argv[1]))))
