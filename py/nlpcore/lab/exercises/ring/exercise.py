"""Exercise ``ring``: the online-softmax monoid across devices — predict a ring's traffic and
memory, compose ring attention from the monoid, balance causal work with the layout.

Sources: Dao, Haziza, Massa & Sizov 2023 (Flash-Decoding) for split-K merging of partials; Liu,
Zaharia & Abbeel 2023 (Ring Attention, arXiv:2310.01889); Brandon et al. 2023 (Striped
Attention, arXiv:2311.09431); Milakov & Gimelshein 2018 (arXiv:1805.02867) for the monoid.

Each step's checks sit beside its statement and solution (``<step>_checks.py``); every check
has two phases, so nothing is judged while the learner's code is live. What they hold the
learner to (each is the property the step teaches):

- Predict: the numbers are compared with what the ring simulator ``kernels.ring.forward``
  reports in its trace (bytes in its "send" events, elements in its "resident" counts).
- Compose: ``ring_forward`` never sees Q, K or V. It gets ``attend(device, q_rows, k_rows)``
  (:mod:`door`), which holds only the partials the ring allows and refuses any other request —
  so the only way to the answer is to follow the ring and merge the partials with the
  learner's own monoid. The library's ring, split-K, reference and flash kernels are refused.
- Balance: the learner's layouts and work counts are judged against valid layouts and their
  causal pairs; the balance itself is measured from the learner's own functions.
"""
from __future__ import annotations

from nlpcore import hardware
from nlpcore.lab.model import Check, Exercise, Folder, Step
from . import balance_checks as bal
from . import compose_checks as com
from . import predict_checks as pre
from .predict_checks import PREDICT_BYTES, PREDICT_D, PREDICT_N, PREDICT_P, PREDICT_RTOL  # noqa: F401
from .compose_checks import FORBIDDEN_MODULES, WHY_OWN  # noqa: F401
from .balance_checks import BALANCE_N, BALANCE_P

HERE = Folder(__file__)  # this exercise's folder: statements and solutions (starters marked in)


def _overlap_numbers() -> dict:
    """The ring's overlap condition in numbers for the statement (nlpcore.hardware)."""
    out = {}
    for link in ("NVLink", "PCIe"):
        out["h200_%s_min_block" % link.lower()] = "{:,}".format(hardware.ring_min_block("H200", link))
        out["h200_%s_oneway" % link.lower()] = "%g" % (hardware.link_bytes_per_s("H200", link) / 1e9)
    return out


def build() -> Exercise:
    predict = Step(
        id="predict", kind="Predict", title="Predict the ring's traffic and memory", minutes=15,
        statement=HERE.statement("predict", N=PREDICT_N, d=PREDICT_D, P=PREDICT_P, BYTES=PREDICT_BYTES,
                                 rtol_percent=int(round(100 * PREDICT_RTOL)),
                                 **_overlap_numbers()),
        starter=HERE.starter("predict"), solution=HERE.solution("predict"),
        hints=(
            "A shard is $n = N / P = 128$ rows. After every step but the last, a device sends the "
            "K and V rows of the shard it holds: $n(d + d_v)$ elements.",
            "The last step sends nothing: nobody needs another shard. That makes $P - 1$ sends.",
            "Memory: $Q_r$ and $O_r$ are $n \\times d$ each, $(m, \\ell)$ is $2n$, and two K/V "
            "shards of $n(d + d_v)$ each (the one in use, the one arriving).",
        ),
        required=("bytes_sent", "peak_elements"), record=("bytes_sent", "peak_elements"),
        refuse=pre.PREDICT_REFUSES,  # predict by reasoning: the simulator would give the numbers
        checks=(
            Check("recorded", "prediction recorded", collect=pre.collect_prediction,
                  judge=pre.judge_recorded),
            Check("bytes", "bytes sent per device within 10% of the simulator's count",
                  collect=pre.collect_prediction, judge=pre.judge_bytes),
            Check("memory", "peak elements per device within 10% of the simulator's count",
                  collect=pre.collect_prediction, judge=pre.judge_memory),
        ))
    compose = Step(
        id="compose", kind="Compose", title="Compose the ring from the monoid", minutes=30,
        statement=HERE.statement("compose"),
        starter=HERE.starter("compose"), solution=HERE.solution("compose"),
        hints=(
            "Subtract the larger lse before exponentiating, as in the online softmax: "
            "`m = np.maximum(lse_a, lse_b)`.",
            "Where both lse are $-\\infty$, shift by 0 instead (`np.where(np.isfinite(m), m, 0)`), "
            "so both weights are 0 and you return $(0, -\\infty)$ without computing $0/0$.",
            "`ring_forward`: keep one running partial per device; for `step` in range(P) and `r` "
            "in range(P) call `attend(r, shards[r], shards[(r - step) % P])` and merge. Then "
            "`np.concatenate` the devices' o and lse in device order.",
        ),
        required=("merge", "ring_forward"), refuse=FORBIDDEN_MODULES,
        checks=(
            Check("own", "your own monoid (no library ring, split-K or reference)",
                  collect=com.collect_own, judge=com.judge_own),
            Check("identity", "identity: (0, -inf) is neutral", collect=com.collect_merges,
                  judge=com.judge_identity),
            Check("split", "partials over key sets merge to attention over all keys",
                  collect=com.collect_merges, judge=com.judge_split),
            Check("laws", "associative and commutative", collect=com.collect_merges,
                  judge=com.judge_laws),
            Check("schedule", "the ring schedule: shard (r - s) mod P at step s",
                  collect=com.collect_rings, judge=com.judge_schedule),
            Check("ring", "ring output equals attention (ragged shards)",
                  collect=com.collect_rings, judge=com.judge_ring),
            Check("causal", "causal rings and empty rows", collect=com.collect_rings,
                  judge=com.judge_causal),
        ))
    balance = Step(
        id="balance", kind="Balance", title="Balance causal work", minutes=25,
        statement=HERE.statement("balance", n=BALANCE_N, P=BALANCE_P),
        starter=HERE.starter("balance"), solution=HERE.solution("balance"),
        hints=(
            "`np.arange(r, n, devices)` is the striped shard of device r.",
            "Zig-zag: `chunks = np.array_split(np.arange(n), 2 * devices)`, then "
            "`np.concatenate([chunks[r], chunks[2 * devices - 1 - r]])`. When 2P does not divide "
            "n, any cut into 2P chunks in order of at most ⌈n / 2P⌉ rows, never growing, is "
            "accepted (array_split's or ceil-sized chunks).",
            "Work of one block: `(keys[None, :] <= rows[:, None]).sum()`, with `rows` the device's "
            "queries and `keys` the shard it holds at that step. Makespan: "
            "`w.max(axis=0).sum()`.",
        ),
        required=("shards", "work", "makespan"), refuse=FORBIDDEN_MODULES,
        report=bal.report_balance,
        checks=(
            Check("shards", "contiguous, striped and zig-zag shards", collect=bal.collect_balance,
                  judge=bal.judge_shards),
            Check("work", "causal work per device and step", collect=bal.collect_balance,
                  judge=bal.judge_work),
            Check("makespan", "makespan of a synchronous ring", collect=bal.collect_balance,
                  judge=bal.judge_makespan),
            Check("balance", "striped and zig-zag balance causal work, contiguous does not",
                  collect=bal.collect_balance, judge=bal.judge_balance),
        ))
    return Exercise(
        id="ring", title="The monoid across devices: split-K decoding and ring attention",
        tier="browser", minutes=70,
        summary=("Predict a ring's traffic and memory per device, compose ring attention from the "
                 "online-softmax monoid over partial (o, lse), and balance causal work with striped "
                 "and zig-zag layouts."),
        steps=(predict, compose, balance),
        sources=("Dao, Haziza, Massa & Sizov 2023, Flash-Decoding for long-context inference "
                 "(PyTorch blog / Stanford CRFM)",
                 "Liu, Zaharia & Abbeel 2023, Ring Attention with Blockwise Transformers for "
                 "Near-Infinite Context, arXiv:2310.01889",
                 "Brandon et al. 2023, Striped Attention: Faster Ring Attention for Causal "
                 "Transformers, arXiv:2311.09431",
                 "Milakov & Gimelshein 2018, Online normalizer calculation for softmax, "
                 "arXiv:1805.02867"))
