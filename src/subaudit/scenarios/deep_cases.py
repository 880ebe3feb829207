"""The deep-network phase's cases and trainings (params.yaml ``deep``): what each case
(scratch, fine-tuning, the substitute gap) trains and audits, and how the canary kinds of
:data:`subaudit.scenarios.deep_canaries.DEEP_KINDS` share its DP trainings (``deep.trainings``).
Torch-free, so the workflow reads it while it parses."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from subaudit.scenarios.deep_canaries import DEEP_KINDS
from subaudit.validation import check_choice

__all__ = ["ALL", "CASE_SELECTIONS", "CASES", "INPUTS", "PRECISIONS", "TRAINING_KEYS", "TRAININGS", "case_audits",
           "case_setting", "case_training", "case_trainings", "group_canaries", "training_groups"]

#: The deep-network cases: trained from scratch, or fine-tuned from a pretrained network.
CASES: dict[str, str] = {
    "scratch": "DP-SGD from the network's random initialisation",
    "finetune": "DP-SGD from the network pretrained on the public images",
    "gap": "DP-SGD from scratch where eps_S is well above eps_AR (full batch, few steps): the substitute "
           "gap in one training",
}
#: What a case may choose for its own trainings instead of the deep phase's (``deep.cases.<case>``
#: beside its training settings): which kinds and games it audits, how many repeats (of the
#: white-box kinds' own trainings too), and its gradient canaries and their scores.
CASE_SELECTIONS: tuple[str, ...] = ("kinds", "games", "repeats", "white_box_repeats", "gradient_canaries",
                                    "gradient_scores")
#: Arithmetic of the deep phase's DP trainings (params.yaml ``deep.precision``). A GPU's rate
#: grows with the narrower ones; the audit stays valid (the noise and clipping are Opacus',
#: in float32 parameters), only its numbers round differently.
PRECISIONS: dict[str, str] = {
    "fp32": "float32 throughout (the default; the same numbers on every machine of one device kind)",
    "tf32": "TF32 matrix products and convolutions on a GPU (float32 on the CPU)",
    "bf16": "the forward in bfloat16 (autocast; the loss, per-example gradients' clipping, noise and "
            "parameters in float32)",
}
#: A case's DP-SGD settings (:class:`subaudit.integrations.deep.Training`).
TRAINING_KEYS: tuple[str, ...] = ("steps", "batch", "lr", "momentum", "noise_multiplier", "clip", "augmentations")


def case_setting(deep: Mapping[str, Any], case: str) -> dict[str, Any]:
    """What ``case`` audits (:data:`CASE_SELECTIONS`): the case's own choice where it makes one
    (not null: a preset nulls a choice it takes back), else the deep phase's (``deep`` is
    params.yaml's ``deep``)."""
    own = deep["cases"][case]
    return {key: deep[key] if own.get(key) is None else own[key] for key in CASE_SELECTIONS}


def case_training(deep: Mapping[str, Any], case: str) -> dict[str, Any]:
    """The DP-SGD settings of ``case`` (:data:`TRAINING_KEYS`), without its selections."""
    own = deep["cases"][case]
    return {key: own[key] for key in TRAINING_KEYS if key in own}


def case_audits(deep: Mapping[str, Any]) -> list[tuple[str, str, str, int]]:
    """Every training of the deep phase as (case, game, group, repeat): per case its games,
    its trainings' groups (``deep.trainings`` over its kinds) and its repeats: a white-box
    kind's training apart from the input kinds' repeats ``white_box_repeats`` times (null:
    ``repeats``); a case that audits white-box kinds only keeps its ``repeats``."""
    out = []
    for case in deep["cases"]:
        sel = case_setting(deep, case)
        for game in sel["games"]:
            for group in training_groups(sel["kinds"], deep["trainings"]):
                repeats = sel["repeats"]
                apart = group != ALL and group_canaries(group, sel["kinds"]) == ([], True)
                if apart and sel["white_box_repeats"] is not None:
                    repeats = sel["white_box_repeats"]
                out += [(case, game, group, repeat) for repeat in range(int(repeats))]
    return out


def case_trainings(deep: Mapping[str, Any]) -> dict[str, int]:
    """The DP trainings of each case (:func:`case_audits`, counted), every case named."""
    counts = Counter(case for case, *_ in case_audits(deep))
    return {case: counts[case] for case in deep["cases"]}


#: How an audit's canary kinds share its DP trainings (params.yaml ``deep.trainings``):
#: ``together``, every kind in each training (the kinds compared on the same trainings);
#: ``white-box-apart``, the input kinds together and the white-box gradient canaries in a
#: training of their own (their Dirac updates on thousands of coordinates cost the network
#: accuracy, which would weaken the input kinds beside them); ``each``, one kind per training
#: (Table 2 of the canary-optimisation paper).
TRAININGS: dict[str, str] = {
    "together": "every kind in each training",
    "white-box-apart": "the input kinds in one training, the white-box gradient canaries in another",
    "each": "one kind per training (as Table 2)",
}
#: The group of a training holding every kind, and of one holding every input kind.
ALL, INPUTS = "all", "inputs"


def training_groups(kinds: list[str] | tuple[str, ...], trainings: str) -> list[str]:
    """The trainings of one audit, by group name: ``all`` (every kind; also when only one side,
    input or white-box, is audited under ``white-box-apart``), ``inputs`` and the white-box
    kinds' own names, or each kind's name."""
    how = check_choice(trainings, "deep.trainings", TRAININGS)
    if how == "each":
        return list(kinds)
    white = [k for k in kinds if DEEP_KINDS[k].white_box]
    if how == "together" or not white or len(white) == len(kinds):
        return [ALL]
    return [INPUTS, *white]


def group_canaries(group: str, kinds: list[str] | tuple[str, ...]) -> tuple[list[str], bool]:
    """The input kinds a training of ``group`` holds and whether it holds the white-box gradient
    canaries."""
    inputs = [k for k in kinds if not DEEP_KINDS[k].white_box]
    white = any(DEEP_KINDS[k].white_box for k in kinds)
    if group == ALL:
        return inputs, white
    if group == INPUTS:
        return inputs, False
    entry = DEEP_KINDS[check_choice(group, "group", DEEP_KINDS)]
    return ([] if entry.white_box else [group]), entry.white_box
