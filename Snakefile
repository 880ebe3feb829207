# subaudit workflow: sets config, validates it, includes one rule file per phase.
# Parameters: params.yaml (shared with DVC). Paper settings: --configfile presets/paper.yaml

from subaudit.pipeline.config import validate_params

configfile: "params.yaml"

validate_params(config, source="params.yaml (merged with any --configfile)")

include: "workflow/rules/common.smk"
include: "workflow/rules/accounting.smk"
include: "workflow/rules/s1.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/natural.smk"
include: "workflow/rules/one_run.smk"
include: "workflow/rules/deep.smk"
include: "workflow/rules/reconstruction.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/report.smk"


localrules:
    all,


rule all:
    default_target: True
    input:
        FIGURES,
        REPORT,
        VARIATION_ESTIMATES,
