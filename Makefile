# convatt: the paper's experiment grid, its tables and plots, and the tests.
#
#   make ptb-all        Table 2b/2a: 9 variants x SEEDS on PTB_DIR             (27 runs)
#   make ud-data        UD 2.2 for the paper's 47 treebanks into UD_DATA_DIR (the LINDAT
#                       tarball, or GitHub with UD_DATA_FLAGS="--source git"); then
#                       make ud-all UD_DIR=data/ud-2.2
#   make ud-compact     a copy of the treebanks under UD_DIR with only FORM and UPOS, gzipped,
#                       into UD_COMPACT_DIR (to carry to a GPU machine; ud-all reads it as is)
#   make ud-all         Table 2c/2d: 5 variants x the paper's 47 treebanks found
#                       under UD_DIR x SEEDS                       (60 on the 4 embedded)
#   make ptb-positions  beyond the paper: the position methods (POSITION_VARIANTS) on PTB
#   make ud-positions   ... and on UD
#   make ptb-attention  beyond the paper: other ways to process the attention matrix (ATTENTION_VARIANTS) on PTB
#   make ud-attention   ... and on UD
#   make toy-all        beyond tagging: Multi-Token Attention's find-the-block task, TOY_VARIANTS x SEEDS (15 runs)
#   make lm-all         beyond tagging: a character language model on UD English-GUM, CHARLM_VARIANTS x SEEDS (21 runs)
#   make lm-continue    efficiency or capacity: each seed's finished char LM run of CONTINUE_FROM (RUNS/charlm/, trained
#                       with EPOCHS first if missing) trained LM_CONTINUE_EPOCHS more, as it is and converted to +Conv2d
#                       and +Conv2d[pre] (`convatt train --from`; 9 runs); give EPOCHS: the source runs' (e.g. 60)
#   make lm-continue-scratch  ... beside them +Conv2d and +Conv2d[pre] from scratch, EPOCHS + LM_CONTINUE_EPOCHS (6 runs)
#   make ud-continue    ... and the tagger: each finished CONTINUE_FROM run under RUNS/ud/ (trained first if missing)
#                       trained on as it is and converted to +Conv2d, the paper's protocol (24 on the 4 embedded)
#   make ud-continue-scratch  ... beside them +Conv2d from scratch (ud-all's runs; 12 on the 4 embedded)
#   make continue-results  docs/results/efficiency_or_capacity.md and its figure from LM_LONG_RUNS and UD_CONTINUE_RUNS,
#                       the finished runs whose directories are gone from CONTINUE_RECORD
#   make tables         results/table2b_ptb.{md,csv}, table2c_ud_macro.*, table2d_ud_per_treebank.*, efficiency_*
#   make plots          results/table2a_*.{png,pdf}, figure2_*.{png,pdf}
#   make docs-results   the committed docs/results/ from RUNS, and the copies of its tables in README.md and docs/results.md
#   make lm-long-results  docs/results/lm-long/ from the longer char LM runs in LM_LONG_RUNS (finished or not),
#                       and its table's copy in docs/results/char_lm.md
#   make beyond-committed docs/results/beyond/ char_lm, toy_task, seeds_* again from their CSVs' per-seed numbers
#   make lm-samples     docs/results/beyond/lm_samples.{csv,md}: greedy text of the char LM runs in RUNS
#                       (seed: the first of SEEDS), cached and by the whole prefix, and its table's copy in docs/results/char_lm.md
#   make status         how many runs of each grid are finished (and queued/running on Slurm),
#                       each unfinished run's epoch and best dev accuracy so far
#   make test           the test suite without its slow tier (TensorFlow, then the layer tests not
#                       marked tf_only and the training tests marked jax_too again on JAX)
#   make test-all       the same with the slow tier, then test-compat at setup.cfg's floors (what CI runs,
#                       docs/contributing.md)
#   make test-numerics  the numeric tests with oneDNN off and on, one and two threads
#   make test-compat    the layers on other versions: a venv holding KERAS, TF and JAX (default: setup.cfg's
#                       floors) and convatt installed from this clone, then the compatibility tests, the layer
#                       tests and the README's examples there (make test-all runs it at the floors)
#   make lint           ruff check and format check; make format applies them
#   make venv           the virtual environment .venv (everything else builds it first)
#
# Every run is a file target, RUNS/ptb/<variant>/seed<S>/result.json or
# RUNS/ud/UD_<Treebank>/<variant>/seed<S>/result.json (the continued runs: RUNS/charlm-continued/<variant>/seed<S>,
# RUNS/charlm-scratch/<variant>/seed<S>, RUNS/ud-continued/UD_<Treebank>/<variant>/seed<S>): `convatt train` writes
# result.json last, so a finished run is never redone, an interrupted grid resumes
# where it stopped (the run itself resumes from its last finished epoch), and
# `make -j N` trains N runs at once, each in its own directory.
# Several GPUs: `make -j 4 ptb-all GPUS="0 1 2 3"` (see experiments/gpu_slot.sh).
# On a Slurm cluster: `make ptb-all SUBMIT=slurm SBATCH_FLAGS="--gres=gpu:1 --time=4:00:00"`
# submits the grid's unfinished runs (neither finished nor queued/running) as one job
# array, one task per run running the same command, and returns; run it again after a
# preemption or a time limit (see experiments/slurm_submit.py; experiments/slurm_local.sh
# starts a one-node Slurm on this machine for trying it).
# The how-to is docs/experiments.md. Paths must not contain spaces.

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
.DEFAULT_GOAL := help

# ---- variables (set on the command line: make ptb-all SEEDS="1 2" EPOCHS=5) ----
# `make help` lists them from the comment above each: "# meaning; e.g. EXAMPLE".
# the Python that creates the venv; e.g. PYTHON=python3.12
PYTHON       ?= python3
# the virtual environment; e.g. VENV=/scratch/convatt-venv
VENV         ?= .venv
# the command that trains a run; e.g. CONVATT="nice -n 5 .venv/bin/convatt"
CONVATT      ?= $(VENV)/bin/convatt
# where the runs go, and where tables, plots and status read them; e.g. RUNS=runs-smoke
RUNS         ?= runs
# where `make tables plots` write; e.g. RESULTS=results-smoke
RESULTS      ?= results
# the PTB corpus: a directory or .tar.gz of WSJ .mrg files; e.g. PTB_DIR=/data/treebank_3/parsed/mrg/wsj
PTB_DIR      ?= convatt/embedded/ptb-sample.tar.gz
# the directory holding UD_<Treebank>/ folders; e.g. UD_DIR=data/ud-2.2 (after make ud-data)
UD_DIR       ?= convatt/embedded/ud-2.2
# where `make ud-data` writes UD 2.2 (pass it as UD_DIR to ud-all); e.g. UD_DATA_DIR=/data/ud-2.2
UD_DATA_DIR  ?= data/ud-2.2
# more options for experiments/ud_data.py (see its --help); e.g. UD_DATA_FLAGS="--source git"
UD_DATA_FLAGS ?=
# where `make ud-compact` writes the FORM/UPOS copy of UD_DIR; e.g. UD_COMPACT_DIR=/scratch/ud-2.2-compact
UD_COMPACT_DIR ?= data/ud-2.2-compact
# the find-the-block task's spec (toy-all); e.g. TOY_SPEC=my-find-block.json
TOY_SPEC     ?= convatt/embedded/find-block/n5-l2.json
# the treebank whose text the character language model reads (lm-all); e.g. LM_DIR=convatt/embedded/ud-2.2/UD_English-LinES
LM_DIR       ?= convatt/embedded/ud-2.2/UD_English-GUM
# toy-all and lm-all: the dev curve every N batches; e.g. SEQ_CURVE_EVERY=50
SEQ_CURVE_EVERY ?= 100
# lm-long-results: the longer character LM runs (finished or still training); e.g. LM_LONG_RUNS=/scratch/runs/lm-long
LM_LONG_RUNS ?= runs/lm-long
# lm-continue, ud-continue: the variant of the finished runs they start from; e.g. CONTINUE_FROM=san-pe-add
CONTINUE_FROM ?= san-pe-add
# lm-continue: the epochs each continued char LM run trains at most (early stopping, patience 3); e.g. LM_CONTINUE_EPOCHS=10
LM_CONTINUE_EPOCHS ?= 20
# continue-results: the RUNS of ud-continue (LM_LONG_RUNS: lm-continue's); e.g. UD_CONTINUE_RUNS=/scratch/runs/ud
UD_CONTINUE_RUNS ?= runs
# continue-results: an earlier page's per-run CSV whose finished runs stand in for directories that are gone (a present one wins), empty: none; e.g. CONTINUE_RECORD=
CONTINUE_RECORD ?= docs/results/efficiency_or_capacity.csv
# fastText vectors for PTB (the paper: wiki-news-300d-1M-subword.vec), empty: none; e.g. EMBEDDINGS=/data/wiki-news-300d-1M-subword.vec
EMBEDDINGS   ?=
# the seeds of every grid; e.g. SEEDS="1 2"
SEEDS        ?= 1 2 3
# the variants, empty: the target's own list (convatt/model/variants.py); e.g. VARIANTS="san-pe-add san-pe-add-conv2d"
VARIANTS     ?=
# the treebanks, empty: the paper's 47 found under UD_DIR; e.g. TREEBANKS="English-LinES UD_German-GSD"
TREEBANKS    ?=
# maximum epochs, empty: 100 with early stopping (patience 3); e.g. EPOCHS=5
EPOCHS       ?=
# at most N sentences per split (smoke runs), empty: all; e.g. LIMIT=200
LIMIT        ?=
# non-empty: --mask-padding (not in the paper: pads take part in attention there); e.g. MASK_PADDING=1
MASK_PADDING ?=
# the dtype policy, empty: float32 (the paper's); e.g. PRECISION=mixed_bfloat16
PRECISION    ?=
# non-empty: TensorBoard logs under each run directory, RUN/tensorboard; e.g. TENSORBOARD=1
TENSORBOARD  ?=
# more options for `convatt train` (see convatt train --help); e.g. TRAIN_FLAGS="--protocol keras3"
TRAIN_FLAGS  ?=
# more options for `convatt plot`; e.g. PLOT_FLAGS=--include-running (the runs still training, dashed)
PLOT_FLAGS   ?=
# GPU slots, one per parallel run, empty: no GPU assignment; e.g. GPUS="0 1 2 3" (with -j 4)
GPUS         ?=
# extras installed into the venv; e.g. EXTRAS=dev,gpu (adds jax[cuda12]; then KERAS_BACKEND=jax)
EXTRAS       ?= dev,hub
# with KERAS_BACKEND=jax, compiled programs are kept here for later runs of the same shapes, empty: off; e.g. JAX_CACHE=
JAX_CACHE    ?= $(abspath $(RUNS))/.jax-cache
# pytest workers of `make test`, `test-all` and `test-numerics` (auto: one per CPU core); e.g. TEST_WORKERS=1
TEST_WORKERS ?= auto
# test-compat: the Keras version, empty: setup.cfg's floor; e.g. KERAS=3.10.0
KERAS        ?=
# test-compat: the TensorFlow version, empty: setup.cfg's floor; e.g. TF=2.19.1
TF           ?=
# test-compat: the JAX version, empty: setup.cfg's floor; e.g. JAX=0.6.2
JAX          ?=
# test-compat: the KerasHub version, default: setup.cfg's floor, empty: none (the KerasHub blocks' tests skip); e.g. HUB=
HUB          ?= $(call floor,keras-hub)
# test-compat's venv, one per combination of versions; e.g. COMPAT_VENV=/scratch/venv-keras38
COMPAT_VENV  ?= .venv-compat/keras$(COMPAT_KERAS)-tf$(COMPAT_TF)-jax$(COMPAT_JAX)$(if $(HUB),-hub$(HUB))
# test-compat: floor (the compatibility file, KerasHub's blocks, the README example: CI's) or all (every layer test file); e.g. COMPAT_SCOPE=all
COMPAT_SCOPE ?= floor
# runs at once, the same as make -j JOBS; e.g. JOBS=2
JOBS         ?=
# slurm: submit the grid's unfinished runs as one Slurm job array instead of running them here; e.g. SUBMIT=slurm
SUBMIT       ?=
# more sbatch options with SUBMIT=slurm; e.g. SBATCH_FLAGS="--partition=gpu --gres=gpu:1 --time=4:00:00"
SBATCH_FLAGS ?=
# with SUBMIT=slurm, at most N array tasks at once, empty: as many as Slurm gives; e.g. MAX_PARALLEL=4
MAX_PARALLEL ?=

ifneq ($(JOBS),)
MAKEFLAGS += -j$(JOBS)
endif

VENV_STAMP := $(VENV)/.convatt-installed

# ---- the grid's lists: one source each (see experiments/grid.py) ----
# The variant lists live in convatt/model/variants.py and the treebanks in the paper's
# Table 2d (convatt/embedded/paper/); grid.py reads both without importing anything
# heavy, so the lists are never written twice and `make -n` works before .venv exists.
comma := ,
empty :=
space := $(empty) $(empty)
GRID := $(shell $(PYTHON) experiments/grid.py)
ifeq ($(GRID),)
$(error experiments/grid.py printed nothing: is $(PYTHON) a working Python 3?)
endif
grid_list = $(subst $(comma), ,$(patsubst $(1):%,%,$(filter $(1):%,$(GRID))))
PAPER_VARIANTS    := $(call grid_list,paper)
UD_VARIANTS       := $(call grid_list,ud)
POSITION_VARIANTS := $(call grid_list,positions)
ATTENTION_VARIANTS := $(call grid_list,attention)
TOY_VARIANTS      := $(call grid_list,toy)
CHARLM_VARIANTS   := $(call grid_list,charlm)
CONTINUE_CHARLM_VARIANTS := $(call grid_list,continue_charlm)
CONTINUE_UD_VARIANTS     := $(call grid_list,continue_ud)
PAPER_TREEBANKS   := $(call grid_list,treebanks)

UD_WANTED  := $(patsubst UD_%,%,$(or $(TREEBANKS),$(PAPER_TREEBANKS)))
UD_FOUND   := $(strip $(foreach t,$(UD_WANTED),$(if $(wildcard $(UD_DIR)/UD_$(t)/.),$(t))))
UD_MISSING := $(filter-out $(UD_FOUND),$(UD_WANTED))

# $(call ptb_runs,VARIANTS) / $(call ud_runs,VARIANTS): the result.json targets
ptb_runs = $(foreach v,$(or $(VARIANTS),$(1)),$(foreach s,$(SEEDS),$(RUNS)/ptb/$(v)/seed$(s)/result.json))
seq_runs = $(foreach v,$(or $(VARIANTS),$(2)),$(foreach s,$(SEEDS),$(RUNS)/$(1)/$(v)/seed$(s)/result.json))
ud_runs = $(foreach t,$(UD_FOUND),$(foreach v,$(or $(VARIANTS),$(1)),$(foreach s,$(SEEDS),$(RUNS)/ud/UD_$(t)/$(v)/seed$(s)/result.json)))

PTB_ALL       := $(call ptb_runs,$(PAPER_VARIANTS))
UD_ALL        := $(call ud_runs,$(UD_VARIANTS))
PTB_POSITIONS := $(call ptb_runs,$(POSITION_VARIANTS))
UD_POSITIONS  := $(call ud_runs,$(POSITION_VARIANTS))
PTB_ATTENTION := $(call ptb_runs,$(ATTENTION_VARIANTS))
UD_ATTENTION  := $(call ud_runs,$(ATTENTION_VARIANTS))
TOY_ALL       := $(call seq_runs,toy,$(TOY_VARIANTS))
LM_ALL        := $(call seq_runs,charlm,$(CHARLM_VARIANTS))
# the continuation experiment: the converted settings are the lists' others
CONTINUE_CONVERTED_LM := $(filter-out $(CONTINUE_FROM),$(CONTINUE_CHARLM_VARIANTS))
LM_CONTINUE         := $(call seq_runs,charlm-continued,$(CONTINUE_CHARLM_VARIANTS))
LM_CONTINUE_SCRATCH := $(call seq_runs,charlm-scratch,$(CONTINUE_CONVERTED_LM))
UD_CONTINUE         := $(subst $(RUNS)/ud/,$(RUNS)/ud-continued/,$(call ud_runs,$(CONTINUE_UD_VARIANTS)))
UD_CONTINUE_SCRATCH := $(call ud_runs,$(filter-out $(CONTINUE_FROM),$(CONTINUE_UD_VARIANTS)))

# One line each, before anything runs, for the targets they concern.
ifneq ($(filter ud-all ud-positions ud-attention ud-continue ud-continue-scratch status,$(MAKECMDGOALS)),)
ifneq ($(UD_MISSING),)
$(info UD: $(words $(UD_MISSING)) of $(words $(UD_WANTED)) treebanks not under $(UD_DIR), skipped: $(UD_MISSING))
endif
endif
ifneq ($(filter ud-all ud-positions ud-attention ud-continue ud-continue-scratch,$(MAKECMDGOALS)),)
ifeq ($(UD_FOUND),)
$(error UD: none of the $(words $(UD_WANTED)) treebanks is under UD_DIR=$(UD_DIR) (expected $(UD_DIR)/UD_<Name>/, e.g. UD_English-LinES))
endif
endif
ifneq ($(filter lm-continue lm-continue-scratch,$(MAKECMDGOALS)),)
ifeq ($(EPOCHS),)
$(error lm-continue: give EPOCHS, the epochs of the CONTINUE_FROM runs it starts from (trained first where missing), e.g. make lm-continue EPOCHS=60 RUNS=runs/lm-long)
endif
endif
ifneq ($(filter ptb-all ptb-positions ptb-attention,$(MAKECMDGOALS)),)
ifeq ($(EMBEDDINGS),)
$(info PTB: EMBEDDINGS is empty, so PTB runs train without pretrained fastText vectors (the paper used wiki-news-300d-1M-subword.vec))
endif
endif

# ---- the runs ----
.PHONY: ptb-all ud-all ptb-positions ud-positions ptb-attention ud-attention toy-all lm-all
.PHONY: lm-continue lm-continue-scratch ud-continue ud-continue-scratch
ifeq ($(SUBMIT),)
ptb-all: $(PTB_ALL)
ud-all: $(UD_ALL)
ptb-positions: $(PTB_POSITIONS)
ud-positions: $(UD_POSITIONS)
ptb-attention: $(PTB_ATTENTION)
ud-attention: $(UD_ATTENTION)
toy-all: $(TOY_ALL)
lm-all: $(LM_ALL)
lm-continue: $(LM_CONTINUE)
lm-continue-scratch: $(LM_CONTINUE_SCRATCH)
ud-continue: $(UD_CONTINUE)
ud-continue-scratch: $(UD_CONTINUE_SCRATCH)
else ifeq ($(SUBMIT),slurm)
# One job array of the grid's runs that are neither finished nor queued/running; each
# array task runs the run's train_command (experiments/slurm_submit.py). The task list
# (RUNS/slurm/<grid>.runs: "RUN_DIR COMMAND" per run) is written here, by make.
SLURM_SUBMIT = $(PYTHON) experiments/slurm_submit.py
define slurm_submit
$(shell mkdir -p $(RUNS)/slurm)$(file >$(RUNS)/slurm/$@.runs,$(foreach t,$(1),$(patsubst %/result.json,%,$(t)) $(call train_command,$(t))
))$(SLURM_SUBMIT) submit --grid $@ --runs $(RUNS) --runs-file $(RUNS)/slurm/$@.runs \
  --python $(abspath $(VENV))/bin/python --chdir $(CURDIR) --sbatch-flags "$(SBATCH_FLAGS)" $(if $(MAX_PARALLEL),--max-parallel $(MAX_PARALLEL))
endef
ptb-all: | $(VENV_STAMP)
	@$(call slurm_submit,$(PTB_ALL))
ud-all: | $(VENV_STAMP)
	@$(call slurm_submit,$(UD_ALL))
ptb-positions: | $(VENV_STAMP)
	@$(call slurm_submit,$(PTB_POSITIONS))
ud-positions: | $(VENV_STAMP)
	@$(call slurm_submit,$(UD_POSITIONS))
ptb-attention: | $(VENV_STAMP)
	@$(call slurm_submit,$(PTB_ATTENTION))
ud-attention: | $(VENV_STAMP)
	@$(call slurm_submit,$(UD_ATTENTION))
toy-all: | $(VENV_STAMP)
	@$(call slurm_submit,$(TOY_ALL))
lm-all: | $(VENV_STAMP)
	@$(call slurm_submit,$(LM_ALL))
# the continued runs are refused (`--from`: not finished) until the runs they start from are
lm-continue: | $(VENV_STAMP)
	@$(call slurm_submit,$(LM_CONTINUE))
lm-continue-scratch: | $(VENV_STAMP)
	@$(call slurm_submit,$(LM_CONTINUE_SCRATCH))
ud-continue: | $(VENV_STAMP)
	@$(call slurm_submit,$(UD_CONTINUE))
ud-continue-scratch: | $(VENV_STAMP)
	@$(call slurm_submit,$(UD_CONTINUE_SCRATCH))
else
$(error SUBMIT=$(SUBMIT): the one value is "slurm" (submit to Slurm); leave it empty to run here)
endif

# $(call train_command,RESULT_JSON): the command that trains one run into RESULT_JSON's
# directory. The parts of RUNS/ptb/<variant>/seed<S>/result.json and
# RUNS/ud/UD_<Treebank>/<variant>/seed<S>/result.json name the preset, variant, seed, data.
run_parts = $(subst /, ,$(patsubst $(RUNS)/%/result.json,%,$(1)))
train_flags = --preset $(1) --variant $(2) --seed $(patsubst seed%,%,$(3)) --data $(4) \
  $(if $(and $(filter ptb,$(1)),$(EMBEDDINGS)),--embeddings $(EMBEDDINGS)) $(if $(EPOCHS),--epochs $(EPOCHS)) \
  $(if $(LIMIT),--limit $(LIMIT)) $(if $(MASK_PADDING),--mask-padding) $(if $(PRECISION),--precision $(PRECISION)) \
  $(if $(TENSORBOARD),--tensorboard $(5)/tensorboard) $(TRAIN_FLAGS) --out $(5)
# the causal sequence tasks (RUNS/toy/<variant>/seed<S>, RUNS/charlm/<variant>/seed<S>): the curve every
# SEQ_CURVE_EVERY batches to the end of the run
seq_flags = --preset $(1) --variant $(2) --seed $(patsubst seed%,%,$(3)) --data $(4) $(if $(6),--epochs $(6)) \
  $(if $(LIMIT),--limit $(LIMIT)) --curve-every $(SEQ_CURVE_EVERY) --curve-until -1 $(TRAIN_FLAGS) --out $(5)
# the continuation experiment's runs: RUNS/charlm-continued/<variant>/seed<S> --from RUNS/charlm/CONTINUE_FROM/seed<S>
# (LM_CONTINUE_EPOCHS), RUNS/charlm-scratch/<variant>/seed<S> (EPOCHS + LM_CONTINUE_EPOCHS: the same batches in all),
# RUNS/ud-continued/UD_<Treebank>/<variant>/seed<S> --from RUNS/ud/UD_<Treebank>/CONTINUE_FROM/seed<S>
continue_source = $(if $(filter charlm-continued,$(word 1,$(1))),$(RUNS)/charlm/$(CONTINUE_FROM)/$(word 3,$(1)),\
  $(RUNS)/ud/$(word 2,$(1))/$(CONTINUE_FROM)/$(word 4,$(1)))
continue_flags = $(if $(filter charlm-continued,$(word 1,$(2))),\
  $(call seq_flags,charlm,$(word 2,$(2)),$(word 3,$(2)),$(LM_DIR),$(1),$(LM_CONTINUE_EPOCHS)) --from $(call continue_source,$(2)),\
  $(if $(filter charlm-scratch,$(word 1,$(2))),\
  $(call seq_flags,charlm,$(word 2,$(2)),$(word 3,$(2)),$(LM_DIR),$(1),$(if $(EPOCHS),$(shell expr $(EPOCHS) + $(LM_CONTINUE_EPOCHS)))),\
  $(call train_flags,ud,$(word 3,$(2)),$(word 4,$(2)),$(UD_DIR)/$(word 2,$(2)),$(1)) --from $(call continue_source,$(2))))
run_flags = $(strip $(if $(filter charlm-continued charlm-scratch ud-continued,$(word 1,$(2))),$(call continue_flags,$(1),$(2)),\
  $(if $(filter ptb,$(word 1,$(2))),\
  $(call train_flags,ptb,$(word 2,$(2)),$(word 3,$(2)),$(PTB_DIR),$(1)),\
  $(if $(filter toy charlm,$(word 1,$(2))),\
  $(call seq_flags,$(word 1,$(2)),$(word 2,$(2)),$(word 3,$(2)),$(if $(filter toy,$(word 1,$(2))),$(TOY_SPEC),$(LM_DIR)),$(1),$(EPOCHS)),\
  $(call train_flags,ud,$(word 3,$(2)),$(word 4,$(2)),$(UD_DIR)/$(word 2,$(2)),$(1))))))
train_env = $(if $(JAX_CACHE),JAX_COMPILATION_CACHE_DIR=$(JAX_CACHE) )
train_program = $(CONVATT) train $(call run_flags,$(patsubst %/result.json,%,$(1)),$(call run_parts,$(1)))
train_command = $(train_env)$(call train_program,$(1))

# One run into the target's directory, its output also appended to train.log there.
# The venv is an order-only prerequisite: reinstalling it (setup.cfg changed) must not
# redo finished runs.
define train
@mkdir -p $(@D)
$(train_env)$(if $(GPUS),GPUS="$(GPUS)" experiments/gpu_slot.sh )$(call train_program,$@) 2>&1 | tee -a $(@D)/train.log
endef

$(RUNS)/ptb/%/result.json: | $(VENV_STAMP)
	$(train)

$(RUNS)/ud/%/result.json: | $(VENV_STAMP)
	$(train)

$(RUNS)/toy/%/result.json: | $(VENV_STAMP)
	$(train)

$(RUNS)/charlm/%/result.json: | $(VENV_STAMP)
	$(train)

# A continued run after the run it starts from (order-only: a source retouched later does not redo it).
$(foreach t,$(LM_CONTINUE) $(UD_CONTINUE),$(eval $(t): | $(call continue_source,$(call run_parts,$(t)))/result.json))

$(RUNS)/charlm-continued/%/result.json: | $(VENV_STAMP)
	$(train)

$(RUNS)/charlm-scratch/%/result.json: | $(VENV_STAMP)
	$(train)

$(RUNS)/ud-continued/%/result.json: | $(VENV_STAMP)
	$(train)

# Never delete a finished run's result.json when make is interrupted.
.PRECIOUS: $(RUNS)/ptb/%/result.json $(RUNS)/ud/%/result.json $(RUNS)/toy/%/result.json $(RUNS)/charlm/%/result.json
.PRECIOUS: $(RUNS)/charlm-continued/%/result.json $(RUNS)/charlm-scratch/%/result.json $(RUNS)/ud-continued/%/result.json

# ---- UD 2.2 download (stdlib only: the system Python, no venv) ----
# TREEBANKS, if set, limits it to those treebanks; a complete treebank is skipped.
.PHONY: ud-data
ud-data:
	$(PYTHON) experiments/ud_data.py --out $(UD_DATA_DIR) \
	  $(if $(TREEBANKS),--treebanks $(subst $(space),$(comma),$(strip $(TREEBANKS)))) $(UD_DATA_FLAGS)

.PHONY: ud-compact
ud-compact: | $(VENV_STAMP)
	$(VENV)/bin/python experiments/ud_compact.py $(UD_DIR) $(UD_COMPACT_DIR) \
	  $(if $(TREEBANKS),--treebanks $(subst $(space),$(comma),$(strip $(TREEBANKS))))

# ---- tables and plots (any subset of runs; notes in the output say what is missing) ----
.PHONY: tables plots status
tables: | $(VENV_STAMP)
	$(CONVATT) tables --runs $(RUNS) --out $(RESULTS)

plots: | $(VENV_STAMP)
	$(CONVATT) plot --runs $(RUNS) --out $(RESULTS) $(PLOT_FLAGS)

# ---- the committed results: docs/results from RUNS (the paper's setting and keras3, PNGs only),
# then the copies of their tables in README.md and docs/results.md (experiments/readme_tables.py, between
# `<!-- table: ... -->` markers; tests/test_readme.py checks that they are the files') ----
.PHONY: docs-results readme-tables
DOCS_RESULTS ?= docs/results
DOCS_SETTINGS := --setting paper --setting keras3
docs-results: | $(VENV_STAMP)
	$(CONVATT) tables --runs $(RUNS) --out $(DOCS_RESULTS) $(DOCS_SETTINGS)
	$(CONVATT) plot --runs $(RUNS) --out $(DOCS_RESULTS) $(DOCS_SETTINGS)
	rm -f $(DOCS_RESULTS)/*.pdf
	$(VENV)/bin/python experiments/readme_tables.py

readme-tables: | $(VENV_STAMP)
	$(VENV)/bin/python experiments/readme_tables.py

# ---- the beyond-tagging pages: the longer character LM runs (finished or still training) under
# LM_LONG_RUNS as docs/results/lm-long/lm_long.md and its figure; beyond-committed: the short runs'
# tables again from the per-seed numbers of docs/results/beyond/*.csv (experiments/beyond_pages.py) ----
.PHONY: lm-long-results beyond-committed
lm-long-results: | $(VENV_STAMP)
	$(VENV)/bin/python experiments/beyond_pages.py long --runs $(LM_LONG_RUNS) --out docs/results/lm-long
	$(VENV)/bin/python experiments/readme_tables.py docs/results/char_lm.md

beyond-committed: | $(VENV_STAMP)
	$(VENV)/bin/python experiments/beyond_pages.py committed --out docs/results/beyond

# ---- efficiency or capacity: the continued runs of lm-continue (under LM_LONG_RUNS) and ud-continue (under
# UD_CONTINUE_RUNS), finished or not, and those of CONTINUE_RECORD whose directories are gone, as
# docs/results/efficiency_or_capacity.md and its figure (kept, not drawn again, where runs come from the record) ----
.PHONY: continue-results
continue-results: | $(VENV_STAMP)
	$(VENV)/bin/python experiments/beyond_pages.py continued --lm-runs $(LM_LONG_RUNS) --ud-runs $(UD_CONTINUE_RUNS) \
	  $(if $(CONTINUE_RECORD),--recorded $(CONTINUE_RECORD)) --out docs/results

# ---- greedy samples of the character LM runs under RUNS (lm-all's layout; the first of SEEDS) after
# prompts from the test text, with each layer's cache and by the whole prefix (experiments/lm_samples.py) ----
.PHONY: lm-samples
lm-samples: | $(VENV_STAMP)
	$(VENV)/bin/python experiments/lm_samples.py collect --runs $(RUNS) --seed $(firstword $(SEEDS))
	$(VENV)/bin/python experiments/readme_tables.py docs/results/char_lm.md

count_done = $(words $(wildcard $(1))) of $(words $(1))
# where Slurm answers: ", N queued, M running on Slurm" (array tasks of RUNS/slurm/ submissions)
count_slurm = $(if $(SLURM_ANSWERS),$(shell $(PYTHON) experiments/slurm_submit.py counts --runs $(RUNS) $(patsubst %/result.json,%,$(1))))
status: SQUEUE := $(shell command -v squeue)
status: SLURM_ANSWERS := $(if $(SQUEUE),$(shell squeue -h -u "$$(id -un)" -o %i >/dev/null 2>&1 && echo yes))
status:
	@echo "RUNS=$(RUNS)"
	$(if $(and $(SQUEUE),$(if $(SLURM_ANSWERS),,no)),@echo "Slurm: squeue is there but does not answer; queued and running runs are not counted")
	@echo "ptb-all:       $(call count_done,$(PTB_ALL)) runs finished$(call count_slurm,$(PTB_ALL))"
	@echo "ud-all:        $(call count_done,$(UD_ALL)) runs finished$(call count_slurm,$(UD_ALL)) ($(words $(UD_FOUND)) treebanks under $(UD_DIR))"
	@echo "ptb-positions: $(call count_done,$(PTB_POSITIONS)) runs finished$(call count_slurm,$(PTB_POSITIONS))"
	@echo "ud-positions:  $(call count_done,$(UD_POSITIONS)) runs finished$(call count_slurm,$(UD_POSITIONS))"
	@echo "ptb-attention: $(call count_done,$(PTB_ATTENTION)) runs finished$(call count_slurm,$(PTB_ATTENTION))"
	@echo "ud-attention:  $(call count_done,$(UD_ATTENTION)) runs finished$(call count_slurm,$(UD_ATTENTION))"
	@echo "toy-all:       $(call count_done,$(TOY_ALL)) runs finished$(call count_slurm,$(TOY_ALL))"
	@echo "lm-all:        $(call count_done,$(LM_ALL)) runs finished$(call count_slurm,$(LM_ALL))"
	@echo "lm-continue:   $(call count_done,$(LM_CONTINUE)) runs finished$(call count_slurm,$(LM_CONTINUE)) (and $(call count_done,$(LM_CONTINUE_SCRATCH)) from scratch)"
	@echo "ud-continue:   $(call count_done,$(UD_CONTINUE)) runs finished$(call count_slurm,$(UD_CONTINUE)) (and $(call count_done,$(UD_CONTINUE_SCRATCH)) from scratch)"
	@if [ -x $(CONVATT) ] && [ -d $(RUNS) ]; then $(CONVATT) status --runs $(RUNS); fi

# ---- environment and tests ----
.PHONY: venv $(VENV) test
venv $(VENV): $(VENV_STAMP)

$(VENV_STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -e '.[$(EXTRAS)]'
	touch $@

LAYER_TESTS := $(wildcard tests/test_layers_*.py)
# the files holding the tests marked jax_too: train, kill and resume exactly, evaluate, tag (the GPU path), decode with the cache
JAX_TRAINING_TESTS := tests/test_training.py tests/test_tagging.py tests/test_generate.py
# pytest-xdist: a test file's tests stay in one worker (its module fixtures are built once)
PYTEST_PARALLEL := $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile)
# every part prints its 15 slowest tests, so that creeping time is seen
PYTEST := $(VENV)/bin/python -m pytest -q --durations=15
# make test leaves out the tests marked slow; make test-all runs them too
test: SLOW := not slow
test-all: SLOW :=
# $(1): a marker expression or nothing; with SLOW: both
select = $(if $(1)$(SLOW),-m "$(strip $(1) $(if $(1),$(if $(SLOW),and)) $(SLOW))")
# The three parts, each whatever the one before gave; at the end the failed ones are named.
test test-all: $(VENV_STAMP)
	@failed=""; \
	part() { name=$$1; shift; echo "---- $@, $$name: $$*"; "$$@" || failed="$$failed, $$name"; }; \
	part "TensorFlow" env KERAS_BACKEND=tensorflow $(PYTEST) $(PYTEST_PARALLEL) $(call select,) tests; \
	part "JAX layers" env KERAS_BACKEND=jax $(PYTEST) $(PYTEST_PARALLEL) $(call select,not tf_only) $(LAYER_TESTS); \
	part "JAX training" env KERAS_BACKEND=jax $(PYTEST) $(PYTEST_PARALLEL) $(call select,jax_too) $(JAX_TRAINING_TESTS); \
	if [ "$@" = test-all ]; then part "the floors" $(MAKE) --no-print-directory test-compat; fi; \
	if [ -n "$$failed" ]; then echo "make $@: FAILED: $${failed#, }"; exit 1; fi; \
	echo "make $@: every part passed"

# ---- the layers on other versions (test-compat): a venv per combination under .venv-compat/, convatt
# installed from this clone as a user installs it (not editable: the tests import the installed package,
# so they run from tests/ where the clone's convatt/ is not on the path) ----
floor = $(shell sed -n 's/^ *$(1)\(\[[a-z0-9]*\]\)\{0,1\}>=\([0-9.]*\).*/\2/p' setup.cfg | head -1)
COMPAT_KERAS := $(or $(KERAS),$(call floor,keras))
COMPAT_TF    := $(or $(TF),$(call floor,tensorflow))
COMPAT_JAX   := $(or $(JAX),$(call floor,jax))
COMPAT_BIN   = $(abspath $(COMPAT_VENV))/bin
COMPAT_PINS  := keras==$(COMPAT_KERAS) tensorflow==$(COMPAT_TF) jax[cpu]==$(COMPAT_JAX) $(if $(HUB),keras-hub==$(HUB))
# the layer tests at the floor (COMPAT_SCOPE=floor, CI's): under TensorFlow the compatibility file (its
# slow tier too: one epoch of the tagger and the char LM), KerasHub's blocks and the README's layer
# example, then under JAX the compatibility file and the README's example; COMPAT_SCOPE=all: every
# layer test file and docs/layers.md's examples under TensorFlow
COMPAT_TF_TESTS = $(if $(filter all,$(COMPAT_SCOPE)),$(LAYER_TESTS:tests/%=%),test_layers_keras_compat.py test_layers_keras_hub.py)
COMPAT_TF_SLOW  = test_layers_keras_compat.py $(if $(filter all,$(COMPAT_SCOPE)),test_layers_docs.py)
COMPAT_PYTEST = cd $(CURDIR)/tests && $(COMPAT_BIN)/python -m pytest -q --durations=15 -p no:cacheprovider $(PYTEST_PARALLEL)
.PHONY: test-compat
test-compat:
	@test -x $(COMPAT_BIN)/pytest || { $(PYTHON) -m venv $(COMPAT_VENV) && \
	  $(COMPAT_BIN)/pip install -q "$(CURDIR)" $(COMPAT_PINS) pytest pytest-xdist hypothesis filelock packaging; }
	@# this clone's code as it is now, the pinned versions kept
	@$(COMPAT_BIN)/pip install -q --no-deps --force-reinstall "$(CURDIR)"
	@echo "---- test-compat: $$($(COMPAT_BIN)/python -c 'import keras, tensorflow, jax; print("Keras", keras.version(), "TensorFlow", tensorflow.__version__, "JAX", jax.__version__)')"
	@failed=""; \
	part() { name=$$1; shift; echo "---- test-compat, $$name"; "$$@" || failed="$$failed, $$name"; }; \
	part "TensorFlow layers" bash -c 'export KERAS_BACKEND=tensorflow; $(COMPAT_PYTEST) -m "not slow" $(COMPAT_TF_TESTS) test_readme.py::test_readme_python_examples_run && $(COMPAT_PYTEST) -m slow $(COMPAT_TF_SLOW)'; \
	part "JAX" bash -c 'export KERAS_BACKEND=jax; $(COMPAT_PYTEST) test_layers_keras_compat.py test_readme.py::test_readme_python_examples_run'; \
	if [ -n "$$failed" ]; then echo "make test-compat: FAILED: $${failed#, }"; exit 1; fi; \
	echo "make test-compat: both parts passed ($(COMPAT_VENV))"

# The numeric tests (what a backend computes: the layers against their references, the tagger,
# the fast path against the baseline, cached against whole-prefix decoding, a stopped run resumed)
# with the kernels and threads varied: TensorFlow with oneDNN off and on, one and two intra-op
# threads each; JAX (XLA's CPU) with one and two. Every combination runs whatever the one before
# gave; the failed ones are named at the end.
NUMERIC_BOTH := $(LAYER_TESTS) tests/test_generate.py::test_cached_greedy_decoding_is_whole_prefix_decoding \
	tests/test_training.py::test_a_run_stopped_in_epoch_2_resumes_to_the_uninterrupted_result
NUMERIC_TF := tests/test_model.py tests/test_bench.py $(NUMERIC_BOTH)
.PHONY: test-all test-numerics
test-numerics: $(VENV_STAMP)
	@failed=""; \
	part() { name=$$1; shift; echo "---- $@, $$name: $$*"; "$$@" || failed="$$failed, $$name"; }; \
	for onednn in 0 1; do for threads in 1 2; do \
	  part "TensorFlow oneDNN=$$onednn threads=$$threads" env KERAS_BACKEND=tensorflow TF_ENABLE_ONEDNN_OPTS=$$onednn \
	    TF_NUM_INTRAOP_THREADS=$$threads $(PYTEST) $(PYTEST_PARALLEL) -m "not slow and not tf_only" $(NUMERIC_TF); \
	done; done; \
	for threads in 1 2; do \
	  part "JAX threads=$$threads" env KERAS_BACKEND=jax \
	    XLA_FLAGS="--xla_cpu_multi_thread_eigen=$$([ $$threads = 1 ] && echo false || echo true) intra_op_parallelism_threads=$$threads" \
	    $(PYTEST) $(PYTEST_PARALLEL) -m "not slow and not tf_only" $(NUMERIC_BOTH); \
	done; \
	if [ -n "$$failed" ]; then echo "make $@: FAILED: $${failed#, }"; exit 1; fi; \
	echo "make $@: every combination passed"

# ruff (configured in pyproject.toml): lint and format check, no changes; `make format` applies them
LINT_PATHS := convatt experiments tests
.PHONY: lint format
lint: $(VENV_STAMP)
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)

format: $(VENV_STAMP)
	$(VENV)/bin/ruff check --fix $(LINT_PATHS)
	$(VENV)/bin/ruff format $(LINT_PATHS)

.PHONY: help
# the header above, then each variable of the block above with its default and an example
help:
	@sed -n '1,/^$$/s/^# \{0,1\}//p' $(firstword $(MAKEFILE_LIST))
	@echo "Variables (make TARGET NAME=value ...):"
	@awk '/^# ---- variables/ {on = 1; next} on && /^ifneq/ {exit} \
	  on && /^# / {note = substr($$0, 3)} \
	  on && /\?=/ {name = $$1; value = $$0; sub(/^[^?]*\?= */, "", value); \
	    printf "  %-14s default: %s\n  %-14s %s\n", name, (value == "" ? "(empty)" : value), "", note; note = ""}' \
	  $(firstword $(MAKEFILE_LIST)) | grep -v '^  *make help lists'
