"""lm-evaluation-harness: the `archzoo` model against lm-eval's own `hf` model on the same
tiny perturbed GPT-2 checkpoint, on local tasks (task YAML + JSON files), offline."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

lm_eval = pytest.importorskip(
    "lm_eval", reason="lm-eval is not installed (pip install 'archzoo[eval]')"
)

WORDS = ["<pad>", "<eos>"] + [f"w{i}" for i in range(30)]
TASKS = ("zoo_choice", "zoo_rolling", "zoo_until")


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def write_checkpoint(directory: Path) -> Path:
    """A 2-layer GPT-2 with weights perturbed off their init (peaked, varied predictions) and
    a word-level tokenizer, saved by transformers."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<eos>", eos_token="<eos>", pad_token="<pad>"
    )
    config = transformers.GPT2Config(
        vocab_size=len(WORDS), n_positions=16, n_embd=32, n_layer=2, n_head=4,
        bos_token_id=1, eos_token_id=1, pad_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    model.save_pretrained(directory)
    fast.save_pretrained(directory)
    return directory


def write_tasks(directory: Path) -> Path:
    """Three tasks on local JSON lines: multiple choice, rolling loglikelihood, generation.
    The rolling texts are longer than the model's 16 positions (several windows)."""
    rng = torch.Generator().manual_seed(5)

    def words(n: int) -> str:
        return " ".join(WORDS[2 + int(i)] for i in torch.randint(0, 30, (n,), generator=rng))

    choice = [
        {
            "context": words(3 + i % 4),
            "choices": [words(1), words(2), words(1 + i % 3)],
            "label": i % 3,
        }
        for i in range(10)
    ]
    rolling = [{"text": words(n)} for n in (5, 16, 17, 40)]
    until = [{"context": words(2 + i % 5), "answer": words(2)} for i in range(6)]
    for name, rows in (("choice", choice), ("rolling", rolling), ("until", until)):
        (directory / f"{name}.jsonl").write_text("\n".join(json.dumps(r) for r in rows))

    def task(name: str, body: str) -> None:
        data = directory / f"{name.removeprefix('zoo_')}.jsonl"
        (directory / f"{name}.yaml").write_text(
            f"task: {name}\ndataset_path: json\n"
            f"dataset_kwargs:\n  data_files:\n    test: {data}\n"
            f"test_split: test\n{body}"
        )

    task(
        "zoo_choice",
        "output_type: multiple_choice\ndoc_to_text: '{{context}}'\n"
        "doc_to_choice: '{{choices}}'\ndoc_to_target: '{{label}}'\n"
        "metric_list:\n  - metric: acc\n",
    )
    task(
        "zoo_rolling",
        "output_type: loglikelihood_rolling\ndoc_to_text: ''\ndoc_to_target: '{{text}}'\n"
        "metric_list:\n  - metric: word_perplexity\n",
    )
    task(
        "zoo_until",
        "output_type: generate_until\ndoc_to_text: '{{context}}'\ndoc_to_target: '{{answer}}'\n"
        "generation_kwargs:\n  until: ['w7']\n  max_gen_toks: 6\n  do_sample: false\n"
        "metric_list:\n  - metric: exact_match\n",
    )
    return directory


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm_eval")
    (root / "ckpt").mkdir()
    (root / "tasks").mkdir()
    return write_checkpoint(root / "ckpt"), write_tasks(root / "tasks")


def evaluate(model: str, checkpoint: Path, tasks: Path) -> dict:
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    import archzoo.evaluation.lm_eval_model  # noqa: F401 - registers "archzoo"

    args = f"pretrained={checkpoint},device=cpu" + (",dtype=float32" if model == "hf" else "")
    return simple_evaluate(
        model=model,
        model_args=args,
        tasks=list(TASKS),
        task_manager=TaskManager(include_path=str(tasks), include_defaults=False),
        batch_size=3,
        log_samples=True,
        num_fewshot=0,
    )


def per_item(results: dict, task: str) -> list:
    samples = sorted(results["samples"][task], key=lambda s: s["doc_id"])
    return [s["resps"] for s in samples]


def test_archzoo_matches_lm_eval_hf_model_on_every_request_type(setup):
    checkpoint, tasks = setup
    ours = evaluate("archzoo", checkpoint, tasks)
    ref = evaluate("hf", checkpoint, tasks)
    # multiple choice: each choice's loglikelihood within 1e-4, same greedy flags and accuracy
    a, b = per_item(ours, "zoo_choice"), per_item(ref, "zoo_choice")
    assert len(a) == len(b) == 10
    for doc_a, doc_b in zip(a, b, strict=True):
        for (ll_a, greedy_a), (ll_b, greedy_b) in zip(
            [r[0] for r in doc_a], [r[0] for r in doc_b], strict=True
        ):
            assert abs(float(ll_a) - float(ll_b)) < 1e-4
            assert bool(greedy_a) == bool(greedy_b)
    acc = ours["results"]["zoo_choice"]["acc,none"]
    assert acc == ref["results"]["zoo_choice"]["acc,none"]
    # rolling: whole-text loglikelihoods (1 to 3 windows of 16 tokens) within 1e-4
    a, b = per_item(ours, "zoo_rolling"), per_item(ref, "zoo_rolling")
    assert len(a) == 4
    for doc_a, doc_b in zip(a, b, strict=True):
        assert abs(float(doc_a[0][0]) - float(doc_b[0][0])) < 1e-4
        assert float(doc_a[0][0]) < -1.0  # a real score, not an empty window
    ppl = ours["results"]["zoo_rolling"]["word_perplexity,none"]
    assert math.isclose(ppl, ref["results"]["zoo_rolling"]["word_perplexity,none"], rel_tol=1e-4)
    # generate_until: identical greedy continuations, cut at 'w7' or eos
    a, b = per_item(ours, "zoo_until"), per_item(ref, "zoo_until")
    assert [r[0] for r in a] == [r[0] for r in b]
    assert any(r[0][0].strip() for r in a)  # something was generated


def test_python_m_archzoo_evaluation_runs_lm_eval_cli(setup, tmp_path):
    """lm-eval's own command line, with the registration imported by `python -m`."""
    checkpoint, tasks = setup
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "archzoo.evaluation", "--model", "archzoo"]
    cmd += ["--model_args", f"pretrained={checkpoint}", "--tasks", "zoo_choice"]
    cmd += ["--include_path", str(tasks), "--batch_size", "4", "--output_path", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_DATASETS_OFFLINE": "1"}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "zoo_choice" in r.stdout and "acc" in r.stdout
    results = [json.loads(p.read_text()) for p in out.rglob("results_*.json")]
    assert results and "acc,none" in results[0]["results"]["zoo_choice"]


def test_unknown_model_arg_is_a_clear_error(setup):
    from archzoo.evaluation.lm_eval_model import ArchzooLM

    checkpoint, _ = setup
    with pytest.raises(ValueError, match="model_args temprature: not arguments of the archzoo"):
        ArchzooLM(pretrained=str(checkpoint), temprature=0.5)
    with pytest.raises(ValueError, match="batch_size='auto': the archzoo model takes an integer"):
        ArchzooLM(pretrained=str(checkpoint), batch_size="auto")


def test_zoo_eval_on_a_zoo_train_run_directory(tmp_path, monkeypatch):
    """`zoo eval RUN` with the run's byte tokenizer; its loglikelihoods equal log-softmax
    sums computed here from the saved model (the default task index is skipped for speed)."""
    import functools

    from click.testing import CliRunner
    from lm_eval.api.instance import Instance
    from lm_eval.tasks import TaskManager

    import archzoo
    from archzoo.cli.main import main
    from archzoo.evaluation.lm_eval_model import ArchzooLM

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(f"the cat sat on mat {i} and the dog ran" for i in range(80)))
    run = tmp_path / "run"
    args = ["train", "gpt2", "--data", str(corpus), "--out", str(run), "--steps", "2"]
    args += ["--batch", "2", "--seq-len", "16", "--eval-examples", "1", "--no-progress"]
    for s in ("n_layers=1", "d_model=16", "n_heads=2", "vocab_size=260", "max_len=32"):
        args += ["--set", s]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    docs = [
        {"context": "the cat", "choices": [" sat", " ran", " on mat"], "label": i % 3}
        for i in range(4)
    ]
    (tasks / "d.jsonl").write_text("\n".join(json.dumps(d) for d in docs))
    (tasks / "zoo_bytes.yaml").write_text(
        f"task: zoo_bytes\ndataset_path: json\ndataset_kwargs:\n  data_files:\n"
        f"    test: {tasks / 'd.jsonl'}\ntest_split: test\noutput_type: multiple_choice\n"
        "doc_to_text: '{{context}}'\ndoc_to_choice: '{{choices}}'\ndoc_to_target: '{{label}}'\n"
        "metric_list:\n  - metric: acc\n"
    )
    monkeypatch.setattr(
        TaskManager,
        "__init__",
        functools.partialmethod(TaskManager.__init__, include_defaults=False),
    )
    out = tmp_path / "results.json"
    r = CliRunner().invoke(
        main,
        ["eval", str(run), "--tasks", "zoo_bytes", "--include-path", str(tasks), "--device", "cpu"]
        + ["--batch-size", "2", "--output", str(out)],
    )
    assert r.exit_code == 0, r.output
    assert "zoo_bytes" in r.output and "acc" in r.output
    assert 0.0 <= json.loads(out.read_text())["results"]["zoo_bytes"]["acc,none"] <= 1.0

    lm = ArchzooLM(pretrained=str(run), batch_size=2)
    pairs = [("the cat", " sat"), ("the dog", " ran on"), ("x", "yz")]
    got = lm.loglikelihood(
        [Instance("loglikelihood", {}, p, i) for i, p in enumerate(pairs)], disable_tqdm=True
    )
    model = archzoo.load(run / "model.safetensors")
    for (context, continuation), (ll, _) in zip(pairs, got, strict=True):
        ids = list((context + continuation).encode())  # byte ids 0..255
        n = len(continuation.encode())
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([ids[:-1]])).logits[0], -1)
        want = sum(logp[t - 1, ids[t]].item() for t in range(len(ids) - n, len(ids)))
        assert abs(ll - want) < 1e-5


def test_zoo_help_does_not_import_lm_eval():
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom archzoo.cli.main import main\n"
        "for args in (['--help'], ['eval', '--help']):\n"
        "    assert CliRunner().invoke(main, args).exit_code == 0\n"
        "print('lm_eval' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "False", r.stderr


def test_generate_until_stops_decoding_at_the_stop_string(setup, monkeypatch):
    """The text equals the full greedy decode cut at the stop string, and decoding stops at
    the step that completes it (not after max_gen_toks)."""
    from lm_eval.api.instance import Instance

    from archzoo.evaluation import lm_eval_model

    checkpoint, _ = setup
    lm = lm_eval_model.ArchzooLM(pretrained=str(checkpoint), batch_size=2)
    steps = []
    real = lm_eval_model.generate

    def counting(*args, on_token, **kwargs):
        def count(token):
            steps.append(token)
            on_token(token)

        return real(*args, on_token=count, **kwargs)

    monkeypatch.setattr(lm_eval_model, "generate", counting)

    def ask(until: list[str]) -> list[str]:
        reqs = [
            Instance("generate_until", {}, (c, {"until": until, "max_gen_toks": 8}), i)
            for i, c in enumerate(["w3 w4", "w10"])
        ]
        return lm.generate_until(reqs, disable_tqdm=True)

    full = ask([])
    assert len(steps) == 8  # no eos here: all of max_gen_toks
    stops = [full[0].split()[2], full[1].split()[2]]  # each row's third word
    steps.clear()
    cut = ask(stops)
    want = []
    for text in full:
        for stop in stops:
            text = text.split(stop)[0]
        want.append(text)
    assert cut == want
    assert len(steps) < 8
