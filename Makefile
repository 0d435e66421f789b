# gpufabric.node — developer entry points. `make demo` and `make test` are the README's two commands.
SHELL := /bin/bash
PY ?= python3
VENV := $(CURDIR)/.venv
BIN := $(VENV)/bin
BUILD := $(CURDIR)/.build
COLL := $(BUILD)/ansible_collections/gpufabric/node
SIM ?= $(CURDIR)/.sim
export ANSIBLE_COLLECTIONS_PATH := $(BUILD)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PYTHONPATH := $(BUILD):$(CURDIR)/tests/lab
export PATH := $(VENV)/bin:$(PATH)
export ANSIBLE_FORCE_COLOR ?= 0
SANITY_VENV := $(CURDIR)/.venv-sanity
# pytest workers for the unit and integration tiers (pytest-xdist); `make unit WORKERS=0` runs in one process
WORKERS ?= auto
# the test tiers write and fsync thousands of small files into throw-away trees; eatmydata (tests/lab/apt-packages.txt)
# makes those fsyncs no-ops for the test run only, the code under test still calls them
NOSYNC = $(shell command -v eatmydata 2>/dev/null)

.PHONY: sysdeps-demo sysdeps-test venv link unit integration sanity lint molecule vm compat collection demo test test-serial clean \
	mutation

# System packages (Debian/Ubuntu, as root: installed when missing; elsewhere: told exactly what to install).
sysdeps-demo:
	@tests/lab/sysdeps.sh tests/lab/apt-demo.txt

sysdeps-test:
	@tests/lab/sysdeps.sh tests/lab/apt-demo.txt tests/lab/apt-packages.txt

# The virtualenvs are built by tests/lab/cached_venv.sh: in place, or once per content key below
# $GPUFABRIC_VENV_CACHE when it is set (.ci/run sets it), with a link here.
$(VENV)/.stamp: requirements.txt tests/lab/cached_venv.sh tests/lab/venv_pip.sh | sysdeps-demo
	PY=$(PY) tests/lab/cached_venv.sh $(VENV) requirements.txt tests/lab/venv_pip.sh -- bash -c \
	  '$(PY) -m venv "$$VENV" && tests/lab/venv_pip.sh "$$VENV" -r requirements.txt'
	touch $@

venv: $(VENV)/.stamp

# Python and Ansible see the repository as ansible_collections/gpufabric/node through a symlink.
link:
	@mkdir -p $(BUILD)/ansible_collections/gpufabric
	@ln -sfn $(CURDIR) $(COLL)

# pytest's temporary trees in RAM where there is room (tests/lab/basetemp.sh), removed after the run
unit: venv link
	tests/lab/basetemp.sh unit $(NOSYNC) $(BIN)/pytest -q -n $(WORKERS) --durations=15 tests/unit

# Tests that need root and network namespaces (the simulated fleet over SSH). A file's tests stay on one worker
# (their fleets are module fixtures); fleets of different files share nothing but the sim's port lock. Files run
# longest first (tests/integration/conftest.py), not in xdist's most-tests-first order.
integration: venv link
	tests/lab/basetemp.sh integration $(NOSYNC) $(BIN)/pytest -q -n $(WORKERS) --dist loadfile --no-loadscope-reorder --durations=25 \
	  tests/integration

# ansible-test's sanity requirements of the pinned ansible-core (part of the key: requirements.txt pins it), read
# from the new virtualenv's own ansible-test (no path of this clone in the build command, so clones share the key)
$(SANITY_VENV)/.stamp: requirements.txt tests/lab/cached_venv.sh tests/lab/venv_pip.sh | venv
	PY=$(PY) tests/lab/cached_venv.sh $(SANITY_VENV) requirements.txt tests/lab/venv_pip.sh -- bash -c \
	  '$(PY) -m venv "$$VENV" \
	   && tests/lab/venv_pip.sh "$$VENV" "$$(grep "^ansible-core" requirements.txt)" \
	   && tests/lab/venv_pip.sh "$$VENV" $$(for f in $$("$$VENV/bin/python" -c "import ansible_test,os;print(os.path.dirname(ansible_test.__file__))")/_data/requirements/sanity.*.txt; do echo -r $$f; done)'
	touch $@

sanity: venv $(SANITY_VENV)/.stamp
	SANITY_VENV=$(SANITY_VENV) tests/sanity/run.sh

# Mutation testing of the drift judges (tests/mutation/README.md; not part of `make test`): mutmut in its own venv,
# which sees .venv's packages through a .pth; `make mutation JUDGES="nccl_log acs"` runs some of them.
MUTATION_VENV := $(CURDIR)/.venv-mutation
JUDGES ?=
$(MUTATION_VENV)/.stamp: tests/mutation/requirements.txt
	@test -x $(BIN)/python || $(MAKE) venv
	$(BIN)/python -m venv $(MUTATION_VENV)
	$(MUTATION_VENV)/bin/pip install -q -r tests/mutation/requirements.txt
	$(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
	  > "$$($(MUTATION_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz-gpufabric-venv.pth"
	touch $@

mutation: $(MUTATION_VENV)/.stamp
	nice -n 19 $(MUTATION_VENV)/bin/python tests/mutation/run.py $(JUDGES)

# Tier 3: the real-kernel scenario in the QEMU lab (image from GPUFABRIC_VM_CACHE when its inputs are unchanged).
vm: venv link
	python3 tests/lab/vm/lab.py deps
	$(BIN)/molecule test -s vm

# Smoke run (sanity without the style linters, then molecule sim) on each other ansible-core minor that
# requires_ansible admits (tests/compat/minors.txt); the full suite runs on the pinned one.
compat: venv link
	tests/compat/run.sh

# The collection artifact builds and installs (offline: it declares no dependency), and what a user gets from it
# works where only it is installed (no kubernetes.core): ansible-doc renders every plugin and role, every playbook
# loads by FQCN, kernel_upgrade.yml runs with Kubernetes off, and an execution environment built with
# ansible-builder installs the runtime requirements only (tests/collection/check_artifact.py).
collection: venv
	rm -rf $(BUILD)/artifact && mkdir -p $(BUILD)/artifact
	$(BIN)/ansible-galaxy collection build --output-path $(BUILD)/artifact .
	$(BIN)/ansible-galaxy collection install --offline --force -p $(BUILD)/artifact/installed $(BUILD)/artifact/gpufabric-node-*.tar.gz
	$(BIN)/python tests/collection/check_artifact.py $(BUILD)/artifact

lint: venv link
	$(BIN)/ansible-lint --offline --profile production

molecule: venv link
	$(BIN)/molecule test -s sim

# README command 1: build a simulated HGX H200 node (and a cross-NUMA PCIe server), provision it, show the proof.
demo: sysdeps-demo venv link
	-$(BIN)/python -m gpufabric_sim destroy --fleet $(SIM) >/dev/null 2>&1
	$(BIN)/python -m gpufabric_sim create --fleet $(SIM) --node sim1=hgx-h200 --node sim2=pcie-4gpu-crossnuma
	$(BIN)/ansible-playbook -i $(SIM)/inventory.yml playbooks/provision.yml
	@# provision.yml reports the reboot the kernel arguments wait for (iommu=pt: without it GPUDirect Storage fails
	@# with EIO, and verify.yml fails the node); the simulated nodes boot what their boot loader now says
	for n in sim1 sim2; do $(BIN)/python -m gpufabric_sim reboot --fleet $(SIM) --node $$n >/dev/null || exit 1; done
	$(BIN)/ansible-playbook -i $(SIM)/inventory.yml playbooks/verify.yml
	@echo "Fleet left running in $(SIM); 'make clean' removes it."

# README command 2: every test tier that runs on a machine without GPUs (tests/run_tiers.sh): the VM lab, then
# compat, in a background lane from the start (the QEMU/TCG guest uses well under one core on average), the others
# one after the other in the foreground, quick ones first; each tier's start and wall time printed.
# `make test-serial` runs them all one after the other.
test: sysdeps-test
	@MAKE="$(MAKE)" tests/run_tiers.sh

test-serial: sysdeps-test
	@MAKE="$(MAKE)" tests/run_tiers.sh --serial

clean:
	-$(BIN)/python -m gpufabric_sim destroy --fleet $(SIM) 2>/dev/null
	rm -rf $(BUILD) $(SIM)
