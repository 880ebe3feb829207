# Shared helpers: wildcard formatting and the lists of targets derived from config.

from subaudit.seeding import derive_seed


def fmt(x):
    """Canonical wildcard text of a number (1.0 -> '1', 0.0625 -> '0.0625')."""
    return f"{float(x):g}"


wildcard_constraints:
    q=r"[0-9.e+-]+",
    eps=r"[0-9.e+-]+",
    rep=r"\d+",
    exp=r"image|text|tabular",
    scenario=r"S[2-5]",
    lo=r"\d+",
    hi=r"\d+",

S1 = config["s1"]
GRID = config["ratio_grid"]

S1_SETTINGS = [(fmt(q), fmt(e)) for q in S1["sampling_rates"] for e in S1["target_epsilons"]]
S1_REPEATS = list(range(S1["repeats"]))
S1_CHECKPOINTS = sorted({*range(S1["every"], S1["steps"] + 1, S1["every"]), S1["steps"]})

FIGURES = expand("results/figures/{name}.{ext}", name=["fig2", "figA5"], ext=["png", "pdf", "csv"])

# Natural-data audits (S2-S5).
from argparse import Namespace

from subaudit.data import SOURCES
from subaudit.schedule import checkpoints

NAT = config["natural"]
EXPERIMENTS = NAT["experiments"]
NAT_FIGURE = {"image": "fig3", "text": "figA6", "tabular": "fig4"}
FIG_EXPERIMENT = {v: k for k, v in NAT_FIGURE.items()}
NAT_REPEATS = list(range(NAT["repeats"]))
UTILITY_SCENARIOS = [s for s in ("S2", "S3") if s in NAT["scenarios"]]
# GPUs a features / training / utility job asks a cluster for (natural.device).
GPUS = 0 if NAT["device"] == "cpu" else 1


def raw_archive(exp):
    """Where the acquire rule puts the source archive of an experiment."""
    source = EXPERIMENTS[exp]["source"]
    return f"data/raw/{source}/{SOURCES[source].filename}"


def source_checksum(source):
    """A checksum params.yaml gives for a source without a pinned one (else None)."""
    given = {e.get("checksum") for e in EXPERIMENTS.values() if e["source"] == source} - {None}
    return given.pop() if given else None


def nat_qs(exp):
    return [fmt(q) for q in EXPERIMENTS[exp]["sampling_rates"]]


def nat_checkpoints(exp):
    e = EXPERIMENTS[exp]
    return [int(t) for t in checkpoints(e["steps"], e["every"])]


def nat_shards():
    """(lo, hi) run ranges of one audit setting."""
    from subaudit.audit import shard_bounds

    return shard_bounds(NAT["runs"], NAT["shard_size"])


def canary_file(wc):
    base = f"results/natural/{wc.exp}/canaries"
    return f"{base}/S2_q{wc.q}.npz" if wc.scenario == "S2" else f"{base}/{wc.scenario}.npz"


def nat_seed(*keys):
    return derive_seed(config["seed"], "natural", *keys)


FIGURES += expand("results/figures/{name}.{ext}",
                  name=[NAT_FIGURE[e] for e in EXPERIMENTS] + ["figA1"],
                  ext=["png", "pdf", "csv"])
