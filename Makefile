# The two entry points of the README (make run, make test), each doing its own set-up.
VENV  := .venv
STAMP := $(VENV)/.installed
CORES ?= all
# Python keeps compiled modules (__pycache__) as it does by default. Where the environment sets
# PYTHONDONTWRITEBYTECODE (our CI machines do), the packages uv installed had none, and every
# process compiled the ~1,300 modules it imports from source again: 7.3 s instead of 3.6 s to
# import torch, SciPy, pandas and Opacus, 6.7 s instead of 3.2 s for a dry run.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test docs setup clean-results

run: $(STAMP)  ## the default workflow (CPU; network: PyPI and a Debian mirror only): figures in results/figures/
	$(VENV)/bin/snakemake --cores $(CORES)
	$(VENV)/bin/python workflow/check_complete.py  # Snakemake leaves a missing output alone if its consumers are up to date

test: $(STAMP)  ## the test suite, on two workers (each module's tests on one)
	$(VENV)/bin/pytest -q -rs --durations=30 -n 2 --dist loadscope --no-loadscope-reorder

docs: $(STAMP)  ## the documentation site, built strictly into build/site/
	$(VENV)/bin/python -m mkdocs build --strict

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt requirements.lock scripts/setup.sh setup.py src/subaudit/engine/_kernels.cpp src/subaudit/engine/_ziggurat.h
	bash scripts/setup.sh

clean-results:  ## remove workflow outputs and logs (keeps the environment)
	rm -rf results logs .snakemake
