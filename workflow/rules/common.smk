# Shared helpers: wildcard formatting and the lists of targets derived from config.

from subaudit.seeding import derive_seed


def fmt(x):
    """Canonical wildcard text of a number (1.0 -> '1', 0.0625 -> '0.0625')."""
    return f"{float(x):g}"


wildcard_constraints:
    q=r"[0-9.e+-]+",
    eps=r"[0-9.e+-]+",
    rep=r"\d+",

S1 = config["s1"]
GRID = config["ratio_grid"]

S1_SETTINGS = [(fmt(q), fmt(e)) for q in S1["sampling_rates"] for e in S1["target_epsilons"]]
S1_REPEATS = list(range(S1["repeats"]))
S1_CHECKPOINTS = sorted({*range(S1["every"], S1["steps"] + 1, S1["every"]), S1["steps"]})

FIGURES = expand("results/figures/{name}.{ext}", name=["fig2", "figA5"], ext=["png", "pdf", "csv"])
