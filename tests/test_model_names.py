"""A `zoo train` run directory is a model directory, and one resolver names every model:
zoo names, weights files, run and HF directories, Hub ids through a real huggingface_hub
cache laid out on disk, offline (issue 30, items 1 and 2)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import archzoo
from archzoo.cli.main import main
from archzoo.errors import printable
from archzoo.model_source import no_weights_message, resolve_model
from archzoo.training import TrainConfig, train
from archzoo.training.tokenizer import ByteTokenizer, byte_tokenizer_json, load_tokenizer

TINY = {
    "n_layers": 1,
    "d_model": 32,
    "n_heads": 2,
    "d_ff": 64,
    "vocab_size": 260,
    "max_len": 64,
    "dropout": 0.0,
}
TEXT = "héllo <s> wörld </s> 🙂\n\tzero\x00 and <mask>, " + "".join(map(chr, range(1, 300)))


def zoo(*args: object, code: int = 0) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == code, (result.output, result.exception)
    return result.output


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A finished three-step run of a tiny GPT-2 on bytes."""
    root = tmp_path_factory.mktemp("run")
    (root / "corpus.txt").write_text("the cat sat on the mat. " * 40, encoding="utf-8")
    cfg = TrainConfig(
        data=[str(root / "corpus.txt")],
        out=str(root / "run"),
        steps=3,
        batch=4,
        seq_len=16,
        eval_examples=2,
        eval_fraction=0.1,
        progress=False,
    )
    train("gpt2", cfg, TINY)
    return root / "run"


# ---------------------------------------------------------------- the bytes tokenizer file


def test_bytes_tokenizer_json_encodes_as_bytes_in_tokenizers_and_transformers(tmp_path):
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    path = ByteTokenizer().save(tmp_path)
    expected = list(TEXT.encode("utf-8"))
    assert ByteTokenizer().encode(TEXT).tolist() == expected
    tok = Tokenizer.from_file(str(path))
    assert tok.encode(TEXT).ids == expected  # '<s>' in the text stays three bytes
    assert tok.decode(expected) == TEXT
    assert [tok.token_to_id(t) for t in ("<pad>", "<s>", "</s>", "<mask>")] == [256, 257, 258, 259]
    fast = PreTrainedTokenizerFast(tokenizer_file=str(path))
    assert fast(TEXT)["input_ids"] == expected and len(fast) == 260
    again = load_tokenizer(str(path))  # as --tokenizer: the same ids and specials
    assert again.vocab_size == 260 and again.specials == ByteTokenizer.specials
    assert again.encode(TEXT).tolist() == expected


# ---------------------------------------------------------------- a run is a model directory


def test_run_directory_holds_weights_spec_and_tokenizer(run_dir):
    assert {"model.safetensors", "spec.yaml", "tokenizer.json"} <= {
        p.name for p in run_dir.iterdir()
    }
    model = archzoo.load(run_dir)  # the directory, nothing else
    same = archzoo.load(run_dir / "model.safetensors")
    assert archzoo.load_spec(run_dir / "spec.yaml") == model.spec
    assert model.spec.data["d_model"] == 32 and model.spec.data["vocab_size"] == 260
    ids = torch.tensor([list(b"the cat")])
    assert torch.equal(model(ids).logits, same(ids).logits)
    assert (run_dir / "tokenizer.json").read_text(encoding="utf-8") == byte_tokenizer_json()
    assert resolve_model(str(run_dir)).kind == "archzoo"


def test_zoo_generate_attn_and_export_take_the_run_directory(run_dir, tmp_path):
    out = zoo("generate", run_dir, "--prompt", "the c", "--max-new-tokens", "6")
    model = archzoo.load(run_dir)
    prompt = torch.tensor([list(b"the c")])
    greedy = model.generate(prompt, max_new_tokens=6)[0].tolist()
    assert out == printable(ByteTokenizer().decode(greedy)) + "\n"

    page = tmp_path / "view.html"
    assert zoo("attn", run_dir, "--text", "the cat", "--out", page) == (
        f"wrote {page} (1 layers x 2 heads, 7 tokens)\n"
    )

    hf_dir = tmp_path / "hf"
    zoo("export", run_dir, "--hf", hf_dir)
    assert (hf_dir / "tokenizer.json").read_bytes() == (run_dir / "tokenizer.json").read_bytes()
    from transformers import AutoModelForCausalLM

    theirs = AutoModelForCausalLM.from_pretrained(hf_dir).eval()
    with torch.no_grad():
        torch.testing.assert_close(theirs(prompt).logits, model(prompt).logits, atol=1e-5, rtol=0)


def test_a_tokenizer_file_is_copied_into_the_run(tmp_path, tokenizer_dir):
    directory, tok = tokenizer_dir
    (tmp_path / "words.txt").write_text(" ".join(f"w{i % 60}" for i in range(800)))
    cfg = TrainConfig(
        data=[str(tmp_path / "words.txt")],
        out=str(tmp_path / "run"),
        tokenizer=str(directory / "tokenizer.json"),
        steps=1,
        batch=2,
        seq_len=8,
        eval_examples=1,
        eval_fraction=0.1,
        progress=False,
    )
    train("gpt2", cfg, {**TINY, "vocab_size": 64})
    copied = tmp_path / "run" / "tokenizer.json"
    assert copied.read_bytes() == (directory / "tokenizer.json").read_bytes()
    text = zoo("generate", tmp_path / "run", "--prompt", "w3 w7", "--max-new-tokens", "2")
    assert len(text.split()) == 4  # two prompt words and two new ones, word-level decoded


def test_a_run_without_its_final_weights_says_so(tmp_path):
    (tmp_path / "checkpoint.safetensors").write_bytes(b"")
    err = zoo("generate", tmp_path, "--prompt", "x", code=2)
    assert err == (
        f"Error: {tmp_path}: a zoo train run without model.safetensors yet (it is written when "
        f"the run ends; continue it with zoo train ... --out {tmp_path} --resume)\n"
    )


# ---------------------------------------------------------------- one resolver


def test_zoo_names_have_no_weights_to_generate_with():
    assert zoo("generate", "gpt2", "--prompt", "hi", code=2) == (
        f"Error: {no_weights_message('gpt2')}\n"
    )
    assert no_weights_message("gpt2").startswith(
        "gpt2 is a spec without weights (random weights are for build, show and train). "
        "Train it (zoo train gpt2 --data FILE --out RUN, then name RUN)"
    )
    with pytest.raises(archzoo.WeightsError, match="gpt2 is a spec without weights"):
        archzoo.load("gpt2")
    assert resolve_model("gpt2").kind == "spec"


def test_names_that_are_nothing_are_one_line_errors(tmp_path, run_dir):
    assert zoo("attn", "gtp2", "--text", "x", "--out", tmp_path / "a.html", code=2) == (
        "Error: no spec file or zoo model named 'gtp2' (did you mean 'gpt2'?)\n"
    )
    missing = run_dir / "nope"  # its parent exists: a path, not a Hub id
    assert zoo("generate", missing, "--prompt", "x", code=2) == (
        f"Error: {missing}: no such file or directory\n"
    )
    assert zoo("export", "gone.safetensors", "--hf", tmp_path / "o", code=2) == (
        "Error: gone.safetensors: no such file\n"
    )


def test_spec_commands_take_every_model_name(run_dir):
    spec = archzoo.load(run_dir).spec
    assert zoo("show", run_dir) == spec.to_yaml()
    report = json.loads(zoo("build", run_dir, "--json"))
    assert report["params"] == archzoo.load(run_dir).num_parameters()
    assert report["spec"] == spec.to_dict()
    assert zoo("validate", run_dir / "model.safetensors").startswith(f"ok: {spec.name} (decoder")
    assert "vocab_size" not in zoo("diff", run_dir, run_dir / "spec.yaml")
    err = zoo("train", run_dir, "--data", run_dir / "spec.yaml", "--out", run_dir / "x", code=2)
    assert err == (
        f"Error: {run_dir}: zoo train starts from random weights and takes a zoo name or spec "
        f"file (this run's spec is {run_dir}/spec.yaml)\n"
    )


def test_weights_file_and_hf_directory_resolve(tmp_path):
    model = archzoo.build_model("gpt2", TINY)
    archzoo.save(model, tmp_path / "m.safetensors")
    ref = resolve_model(tmp_path / "m.safetensors")
    assert (ref.kind, ref.directory) == ("weights", tmp_path)
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text('{"model_type": "gpt2"}')
    assert resolve_model(str(tmp_path / "hf")).kind == "hf"


def test_device_and_dtype_options(run_dir):
    out = zoo(
        "generate", run_dir, "--prompt", "the", "--max-new-tokens", "3",
        "--device", "cpu", "--dtype", "bfloat16",
    )  # fmt: skip
    model = archzoo.load(run_dir, dtype=torch.bfloat16)
    greedy = model.generate(torch.tensor([list(b"the")]), max_new_tokens=3)[0].tolist()
    assert out == printable(ByteTokenizer().decode(greedy)) + "\n"
    assert zoo("generate", run_dir, "--prompt", "x", "--revision", "v1", code=2) == (
        f"Error: revision 'v1' applies to Hub ids; {run_dir} is not one\n"
    )
    assert zoo("generate", run_dir, "--prompt", "x", "--device", "meta", code=2) == (
        "Error: --device meta holds no weights to run; expected cpu, cuda, cuda:N\n"
    )
    for command in ("generate", "attn", "export"):
        help_text = zoo(command, "--help")
        assert "--device" in help_text and "--dtype" in help_text and "--revision" in help_text


# ---------------------------------------------------------------- Hub ids, offline


def hub_cache(home: Path, repo: str, files: dict[str, bytes], refs: dict[str, str]) -> None:
    """huggingface_hub's cache layout: blobs by content hash, snapshots/<commit>/ of links
    to them, refs/<name> holding a commit."""
    root = home / "hub" / ("models--" + repo.replace("/", "--"))
    for commit in set(refs.values()):
        snap = root / "snapshots" / commit
        snap.mkdir(parents=True)
        for name, data in files.items():
            blob = root / "blobs" / hashlib.sha256(data).hexdigest()
            blob.parent.mkdir(parents=True, exist_ok=True)
            blob.write_bytes(data)
            (snap / name).symlink_to(os.path.relpath(blob, snap))
    for ref, commit in refs.items():
        (root / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (root / "refs" / ref).write_text(commit)


def test_hub_ids_resolve_through_the_huggingface_cache_offline(tmp_path, run_dir):
    home = tmp_path / "hf-home"
    files = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    hf_dir = tmp_path / "hf"
    zoo("export", run_dir, "--hf", hf_dir)
    hf_files = {p.name: p.read_bytes() for p in hf_dir.iterdir()}
    main_commit, tag_commit = "a" * 40, "b" * 40
    hub_cache(home, "someone/tiny-run", files, {"main": main_commit})
    hub_cache(home, "someone/tiny-hf", hf_files, {"main": main_commit, "v1": tag_commit})
    script = textwrap.dedent(
        """
        import json, sys
        import torch
        import archzoo
        from click.testing import CliRunner
        from archzoo.cli.main import main

        ids = torch.tensor([list(b"the cat")])
        out = {}
        for name in ("someone/tiny-run", "someone/tiny-hf", "someone/tiny-hf@v1"):
            ref = archzoo.resolve_model(name)
            out[name] = [ref.kind, str(ref.path), archzoo.load(name)(ids).logits.sum().item()]
        out["from_hf"] = archzoo.from_hf("someone/tiny-hf").spec.name
        out["revision"] = str(archzoo.resolve_model("someone/tiny-hf", revision="v1").path)
        def zoo(*args):
            r = CliRunner().invoke(main, list(args))
            return [r.exit_code, r.output]
        out["generate"] = zoo("generate", "someone/tiny-hf", "--prompt", "the c",
                              "--max-new-tokens", "4", "--revision", "v1")
        out["show"] = zoo("show", "someone/tiny-hf")
        out["show_run"] = zoo("show", "someone/tiny-run")
        out["import"] = zoo("import", "someone/tiny-hf", "--json")
        out["missing"] = zoo("generate", "someone/missing", "--prompt", "x")
        out["missing_rev"] = zoo("generate", "someone/tiny-hf@v9", "--prompt", "x")
        print(json.dumps(out))
        """
    )
    env = {**os.environ, "HF_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    env.pop("HF_HUB_CACHE", None)
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    expected = archzoo.load(run_dir)(torch.tensor([list(b"the cat")])).logits.sum().item()
    snaps = home / "hub" / "models--someone--tiny-hf" / "snapshots"
    run_snap = home / "hub" / "models--someone--tiny-run" / "snapshots" / main_commit
    assert got["someone/tiny-run"][:2] == ["archzoo", str(run_snap)]
    assert got["someone/tiny-hf"][:2] == ["hf", str(snaps / main_commit)]
    assert got["someone/tiny-hf@v1"][:2] == ["hf", str(snaps / tag_commit)]
    for name in ("someone/tiny-run", "someone/tiny-hf", "someone/tiny-hf@v1"):
        assert got[name][2] == pytest.approx(expected, rel=1e-5)
    assert got["revision"] == str(snaps / tag_commit)
    model = archzoo.load(run_dir)
    greedy = model.generate(torch.tensor([list(b"the c")]), max_new_tokens=4)[0].tolist()
    assert got["generate"] == [0, printable(ByteTokenizer().decode(greedy)) + "\n"]
    assert got["show_run"] == [0, archzoo.load(run_dir).spec.to_yaml()]
    assert got["import"][0] == 0
    assert json.loads(got["import"][1])["params"] == archzoo.load(run_dir).num_parameters()
    shown = archzoo.load_spec(got["show"][1])  # the HF config read back as a spec
    assert shown.data["d_model"] == 32 and shown.data["vocab_size"] == 260
    assert got["missing"] == [
        2,
        "Error: someone/missing: not in the Hugging Face cache and HF_HUB_OFFLINE is set "
        "(no file or directory of that name here either)\n",
    ]
    assert got["missing_rev"][0] == 2 and got["missing_rev"][1].count("\n") == 1
    assert got["missing_rev"][1].startswith("Error: someone/tiny-hf@v9: ")
