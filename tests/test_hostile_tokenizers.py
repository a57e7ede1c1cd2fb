"""Hostile input, category 3: tokenizer files and text.

Every tokenizer.json goes through one reader (archzoo.io.tokenizer_file): a size cap checked
before reading, the file named when it is not UTF-8, not JSON or not a tokenizer, and the
`tokenizers` library's errors and Rust panics (PanicException is a BaseException) turned
into a TokenizerError naming the file. A prompt that is not UTF-8 is refused naming the
option. The user's files are byte-identical after every refusal.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest
import torch
from hostile_util import TINY, assert_clean_failure, snapshot, zoo_fails, zoo_subprocess

import archzoo
from archzoo.io.tokenizer_file import MAX_TOKENIZER_BYTES, TokenizerError, read_tokenizer
from archzoo.training.tokenizer import load_tokenizer

tokenizers = pytest.importorskip("tokenizers")

WORDS = ["[UNK]", "the", "cat", "sat"] + [f"w{i}" for i in range(60)]  # 64 ids
CATASTROPHIC = {"type": "Replace", "pattern": {"Regex": "(a+)+$"}, "content": "x"}
SLOW_TEXT = "a" * 50_000 + "!"  # the regex backtracks past onig's retry limit on this


def good_tokenizer() -> dict:
    tok = tokenizers.Tokenizer(
        tokenizers.models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]")
    )
    tok.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    return json.loads(tok.to_str())


def with_changes(**changes: object) -> str:
    data = good_tokenizer()
    for dotted, value in changes.items():
        *outer, last = dotted.split("__")
        node = data
        for key in outer:
            node = node[key]
        node[last] = value
    return json.dumps(data)


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> bytes:
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("w") / "m.safetensors"
    archzoo.save(archzoo.build_model("gpt2", TINY), path)
    return path.read_bytes()


def model_dir(directory: Path, weights: bytes, tokenizer: str | bytes | None) -> Path:
    """A tiny GPT-2 saved as m.safetensors, with `tokenizer` as tokenizer.json beside it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "m.safetensors").write_bytes(weights)
    if isinstance(tokenizer, str):
        (directory / "tokenizer.json").write_text(tokenizer, encoding="utf-8")
    elif tokenizer is not None:
        (directory / "tokenizer.json").write_bytes(tokenizer)
    return directory


def command(name: str, directory: Path, text: str) -> list:
    model = directory / "m.safetensors"
    if name == "generate":
        return ["generate", model, "--prompt", text, "--max-new-tokens", "2"]
    return ["attn", model, "--text", text, "--out", directory / "view.html"]


# id, tokenizer.json contents, text, words of the error (after the file's path)
FILE_CASES = [
    ("not-utf8", b'{"model": "\xff\xfe"}', "the cat", "not a tokenizer.json: byte 0xff at offset 11 is not UTF-8 text"),
    ("not-json", "the cat sat", "the cat", "not a tokenizer.json: not JSON (Expecting value: line 1 column 1"),
    ("json-list", "[1, 2, 3]", "the cat", "not a tokenizer.json: a JSON list without a 'model'"),
    ("config-json", json.dumps({"model_type": "gpt2", "n_embd": 16}), "the cat", "not a tokenizer.json: an object without a 'model'"),
    ("deep-json", "[" * 200_000 + "]" * 200_000, "the cat", "not a tokenizer.json: JSON nested too deeply"),
    ("unknown-model", with_changes(model__type="NoSuchModel"), "the cat", "reading the tokenizer failed"),
    ("unk-missing", with_changes(model__vocab={w: i for i, w in enumerate(WORDS) if i}), "the dog", "encoding the text failed: WordLevel error: Missing [UNK] token from the vocabulary"),
    ("catastrophic-regex", with_changes(normalizer=CATASTROPHIC), SLOW_TEXT, "the tokenizers library failed encoding the text: Onig: Regex search error: retry-limit-in-match over"),
]  # fmt: skip


@pytest.mark.parametrize("name", ["generate", "attn"])
@pytest.mark.parametrize("case", FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_a_bad_tokenizer_file_is_refused_naming_it(case, name, tmp_path, weights):
    _, contents, text, words = case
    directory = model_dir(tmp_path / "model", weights, contents)
    before = snapshot(directory)
    zoo_fails(command(name, directory, text), f"{directory / 'tokenizer.json'}: {words}")
    assert snapshot(directory) == before  # nothing written, not even an empty page


@pytest.mark.parametrize("case", FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_zoo_train_refuses_the_same_files_naming_them(case, tmp_path):
    _, contents, text, words = case
    tok = tmp_path / "tok.json"
    tok.write_bytes(contents if isinstance(contents, bytes) else contents.encode())
    (tmp_path / "corpus.txt").write_text((text + "\n") * 4)
    before = snapshot(tmp_path)
    args = ["train", "gpt2", "--data", tmp_path / "corpus.txt", "--tokenizer", tok]
    args += ["--out", tmp_path / "run", "--steps", "1", "--seq-len", "8", "--no-progress"]
    args += [a for k, v in TINY.items() for a in ("--set", f"{k}={v}")]
    zoo_fails(args, f"{tok}: {words}")
    assert snapshot(tmp_path) == before  # no token cache or temp file left either
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_the_guarded_reader_reads_a_good_tokenizer_as_the_library_does(tmp_path):
    (tmp_path / "tokenizer.json").write_text(with_changes(), encoding="utf-8")
    ours = read_tokenizer(tmp_path / "tokenizer.json")
    theirs = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    text = "the cat sat on w7"
    assert ours.encode(text).ids == theirs.encode(text).ids == [1, 2, 3, 0, 11]
    assert ours.decode([1, 2, 3]) == theirs.decode([1, 2, 3]) == "the cat sat"
    assert load_tokenizer(str(tmp_path)).encode(text).tolist() == [1, 2, 3, 0, 11]


def test_a_panic_is_an_archzoo_error_and_its_rust_report_is_not_printed(
    tmp_path, weights, capfd, monkeypatch
):
    """With RUST_BACKTRACE=1: no 'panicked at' report and no backtrace on file descriptor 2."""
    monkeypatch.setenv("RUST_BACKTRACE", "1")
    directory = model_dir(tmp_path / "m", weights, with_changes(normalizer=CATASTROPHIC))
    before = snapshot(directory)
    zoo_fails(command("attn", directory, SLOW_TEXT), "the tokenizers library failed encoding")
    err = capfd.readouterr().err
    assert "panicked" not in err and "backtrace" not in err, err
    assert snapshot(directory) == before


def test_a_warning_the_library_prints_still_reaches_stderr(tmp_path, capfd):
    """Native stderr is held during a call, and passed on when the call did not panic."""
    from archzoo.io.tokenizer_file import guarded

    def warn(text: str) -> int:
        os.write(2, b"library warning\n")
        return len(text)

    assert guarded(tmp_path, "testing", warn, "abc") == 3
    assert capfd.readouterr().err == "library warning\n"


def test_threads_that_call_the_library_at_once_lose_no_stderr(tmp_path, capfd):
    """Descriptor 2 is process-wide: concurrent holds must not leave it on a closed file."""
    from archzoo.io.tokenizer_file import guarded

    def warn(i: int) -> int:
        os.write(2, b"w%d\n" % i)
        time.sleep(0.001)  # let the other threads in while descriptor 2 is held
        return i

    def worker(base: int) -> None:
        for i in range(base, base + 100):
            guarded(tmp_path, "testing", warn, i)

    threads = [threading.Thread(target=worker, args=(k * 100,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    os.write(2, b"after\n")
    lines = capfd.readouterr().err.splitlines()
    assert sorted(lines) == sorted([f"w{i}" for i in range(400)] + ["after"])


def test_a_multi_gb_tokenizer_is_refused_before_it_is_read(tmp_path, weights):
    """A sparse 4 GiB tokenizer.json, under a 3 GiB address-space limit: refused at once."""
    directory = model_dir(tmp_path / "m", weights, None)
    with open(directory / "tokenizer.json", "wb") as f:
        f.truncate(4 * 2**30)
    run = zoo_subprocess(command("generate", directory, "the cat"))
    words = f"is 4,294,967,296 bytes, more than the {MAX_TOKENIZER_BYTES:,}"
    assert_clean_failure(run, f"{directory / 'tokenizer.json'}: the tokenizer {words}")
    assert (directory / "tokenizer.json").stat().st_size == 4 * 2**30


def test_a_fifo_named_tokenizer_json_is_refused_without_blocking(tmp_path, weights):
    directory = model_dir(tmp_path / "m", weights, None)
    fifo = directory / "tokenizer.json"
    os.mkfifo(fifo)
    done = threading.Event()

    def unblock() -> None:  # a reader stuck on the FIFO gets EOF after 20 s, not a hang
        if not done.wait(20):
            os.close(os.open(fifo, os.O_WRONLY))

    watchdog = threading.Thread(target=unblock, daemon=True)
    watchdog.start()
    try:
        zoo_fails(command("attn", directory, "the cat"), f"{fifo}: the tokenizer is not a regular")
        with pytest.raises(TokenizerError, match="is not a regular file"):
            load_tokenizer(str(directory))
    finally:
        done.set()
        watchdog.join()


@pytest.mark.parametrize("name", ["generate", "attn"])
@pytest.mark.parametrize(
    "text, words",
    [
        ("\udcff", "byte 0xff at character 0 is not valid UTF-8"),
        ("the \udcc3\udc28", "byte 0xc3 at character 4 is not valid UTF-8"),
        ("the \ud800", "a lone surrogate U+D800 at character 4"),
    ],
)
def test_text_that_is_not_utf8_is_refused_naming_the_option(name, text, words, tmp_path, weights):
    directory = model_dir(tmp_path / "m", weights, with_changes())
    before = snapshot(directory)
    option = "--prompt" if name == "generate" else "--text"
    zoo_fails(command(name, directory, text), f"Invalid value for '{option}'", words)
    assert snapshot(directory) == before


def test_undecodable_argv_bytes_are_refused_in_a_real_process(tmp_path, weights):
    """`zoo generate --prompt $'\\xff'`: the byte reaches click as a lone surrogate."""
    directory = model_dir(tmp_path / "m", weights, with_changes())
    run = zoo_subprocess(command("generate", directory, os.fsdecode(b"\xff")))
    assert_clean_failure(run, "'--prompt'", "byte 0xff at character 0 is not valid UTF-8")


def test_the_library_api_refuses_text_that_is_not_utf8(tmp_path):
    (tmp_path / "tokenizer.json").write_text(with_changes(), encoding="utf-8")
    with pytest.raises(TokenizerError, match="not valid UTF-8: byte 0xff at character 3"):
        load_tokenizer(str(tmp_path)).encode("the\udcff")
