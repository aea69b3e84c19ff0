"""Reading parallel text: files (plain, gzipped, downloaded) and Hugging Face datasets."""

import gzip
from pathlib import Path

import pytest

from qkvmt.errors import UserError
from qkvmt.text.sources import HFDataset, TextFiles, read_lines, read_parallel, stream_lines
from tests.conftest import write_corpus


def test_gzip_and_plain_files_read_the_same(tmp_path):
    gz = TextFiles(write_corpus(tmp_path / "gz", gz=True)).read("train", "de", "en")
    plain = TextFiles(write_corpus(tmp_path / "plain", gz=False)).read("train", "de", "en")
    assert gz == plain
    assert len(gz[0]) == 300 and all(gz[0]) and all(gz[1])


def test_line_count_mismatch_names_both_files_and_counts(tmp_path):
    (tmp_path / "a.de").write_text("eins\nzwei\ndrei\n")
    (tmp_path / "a.en").write_text("one\ntwo\n")
    with pytest.raises(UserError) as e:
        read_parallel(tmp_path / "a.de", tmp_path / "a.en")
    msg = str(e.value)
    assert "a.de" in msg and "a.en" in msg and "3" in msg and "2" in msg


def test_non_utf8_names_file_and_line(tmp_path):
    p = tmp_path / "bad.de.gz"
    p.write_bytes(gzip.compress(b"gut\nauch gut\nschlecht \xff\xfe\n"))
    with pytest.raises(UserError, match=r"bad\.de\.gz, line 3"):
        read_lines(p)


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("text", [b"a b\n\n  c \r\nd\xe2\x80\xa8e\n", b"a\nlast without newline", b"", b"\n"])
def test_streamed_lines_are_the_lines_read_whole(text, gz, tmp_path):
    path = tmp_path / ("f.gz" if gz else "f")
    path.write_bytes(gzip.compress(text) if gz else text)
    assert list(stream_lines(path)) == read_lines(path)


def test_streamed_lines_name_a_non_utf8_line_and_a_missing_file(tmp_path):
    p = tmp_path / "bad.de.gz"
    p.write_bytes(gzip.compress(b"gut\nschlecht \xff\n"))
    lines = stream_lines(p)
    assert next(lines) == "gut"  # read as they come, not all first
    with pytest.raises(UserError, match=r"bad\.de\.gz, line 2: not valid UTF-8"):
        next(lines)
    with pytest.raises(UserError, match=f"file not found: {tmp_path / 'nope'}"):
        list(stream_lines(tmp_path / "nope"))


def test_missing_split_says_which_setting_to_change(tmp_path):
    with pytest.raises(UserError, match="data.root"):
        TextFiles(tmp_path).read("train", "de", "en")


def test_missing_file_is_downloaded_from_download_url(tmp_path):
    remote = write_corpus(tmp_path / "remote")
    local = tmp_path / "local"
    files = TextFiles(local, download_url=remote.as_uri())
    src, tgt = files.read("val", "de", "en")
    assert (src, tgt) == TextFiles(remote).read("val", "de", "en")
    assert sorted(p.name for p in local.iterdir()) == ["val.de.gz", "val.en.gz"]


def test_failed_download_leaves_no_partial_file_and_no_folder_it_made(tmp_path):
    (tmp_path / "kept").mkdir()
    nowhere = (tmp_path / "nowhere").as_uri()
    with pytest.raises(UserError, match="cannot download"):
        TextFiles(tmp_path / "kept", download_url=nowhere).read("val", "de", "en")
    assert list((tmp_path / "kept").iterdir()) == []  # the user's folder stays, empty
    with pytest.raises(UserError, match=r"put val\.de\.gz into .*typo/data by hand, or set data\.root"):
        TextFiles(tmp_path / "typo" / "data", download_url=nowhere).read("val", "de", "en")
    assert not (tmp_path / "typo").exists()  # a mistyped data.root leaves nothing behind


def test_missing_relative_file_says_where_it_was_looked_for(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match=rf"file not found: sub/x\.de \(relative to {tmp_path}\); check the path"):
        read_lines(Path("sub/x.de"))


def _save_hf(tmp_path, rows_by_split):
    datasets = pytest.importorskip("datasets")
    folder = tmp_path / "hf_local"
    folder.mkdir()
    for split, rows in rows_by_split.items():
        datasets.Dataset.from_list(rows).to_parquet(str(folder / f"{split}.parquet"))
    return folder


def test_hf_dataset_with_translation_column_offline(tmp_path):
    rows = [{"translation": {"de": f"satz {i}", "en": f"sentence {i}"}} for i in range(5)]
    folder = _save_hf(tmp_path, {"train": rows, "validation": rows[:2]})
    src, tgt = HFDataset(str(tmp_path / "cache"), str(folder)).read("validation", "de", "en")
    assert src == ["satz 0", "satz 1"] and tgt == ["sentence 0", "sentence 1"]


def test_hf_dataset_with_one_column_per_language(tmp_path):
    folder = _save_hf(tmp_path, {"train": [{"en": "a dog", "de": "ein Hund"}]})
    assert HFDataset(str(tmp_path / "cache"), str(folder)).read("train", "en", "de") == (["a dog"], ["ein Hund"])


def test_hf_dataset_without_the_languages_is_a_clear_error(tmp_path):
    folder = _save_hf(tmp_path, {"train": [{"translation": {"fr": "chat", "en": "cat"}}]})
    with pytest.raises(UserError, match="translation column has no"):
        HFDataset(str(tmp_path / "cache"), str(folder)).read("train", "de", "en")


def test_hf_dataset_reads_invisible_characters_as_nothing(tmp_path):
    clean = [{"de": "ein Hund", "en": "a dog"}, {"de": "", "en": "nothing"}]
    hidden = [{"de": "\ufeffein\u200b Hund", "en": "a dog\x00"}, {"de": "\u200b\u2060", "en": "\ufeffnothing"}]

    def read(rows, name):
        (tmp_path / name).mkdir()
        folder = _save_hf(tmp_path / name, {"train": rows})
        return HFDataset(str(tmp_path / "cache"), str(folder)).read("train", "de", "en")

    assert read(hidden, "hidden") == read(clean, "clean")
