# gpufabric.node — developer entry points. `make demo` and `make test` are the README's two commands.
SHELL := /bin/bash
PY ?= python3
VENV := $(CURDIR)/.venv
BIN := $(VENV)/bin
BUILD := $(CURDIR)/.build
COLL := $(BUILD)/ansible_collections/gpufabric/node
SIM ?= $(CURDIR)/.sim
export ANSIBLE_COLLECTIONS_PATH := $(BUILD):$(VENV)/lib/python3*/site-packages
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PYTHONPATH := $(BUILD):$(CURDIR)/tests/lab

.PHONY: venv link unit demo test clean

$(VENV)/.stamp: requirements.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt
	touch $@

venv: $(VENV)/.stamp

# Python and Ansible see the repository as ansible_collections/gpufabric/node through a symlink.
link:
	@mkdir -p $(BUILD)/ansible_collections/gpufabric
	@ln -sfn $(CURDIR) $(COLL)

unit: venv link
	$(BIN)/pytest -q tests/unit

clean:
	-$(BIN)/python -m gpufabric_sim destroy --fleet $(SIM) 2>/dev/null
	rm -rf $(BUILD) $(SIM)
