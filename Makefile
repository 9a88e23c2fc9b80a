# The project's commands. On a fresh machine, `make html` creates .venv, installs the pinned
# requirements and the package, then builds the site; `make test` runs everything.
#
#   make html     build the site into build/html (runs the changed gallery scripts)
#   make test     lint, unit tests and doctests, a clean build running every example,
#                 then the build-behaviour and built-site tests (a sample of the reruns:
#                 half the pages that train once more under one other seed and CPU
#                 capability, the other half the next day, ATTENTION_CLAIMS_SAMPLE=all for all;
#                 and a few downloads run in full); under 20 minutes on 2 cores
#   make serve    serve build/html on http://127.0.0.1:8000 for reading
#   make lint     ruff check and ruff format --check
#   make bench    timing and memory benchmarks
#   make robust   the full reruns: every page as a script over seeds 0-9 and every CPU
#                 capability (rewrites tests/docs/claims.md, the weakest margin of every
#                 claim), then `make downloads`, then the browser's accessibility and offline
#                 checks of every page (make test opens every other tutorial and a third
#                 of the API, source and Chinese pages, another share each day)
#   make downloads  every downloaded notebook and script of the built site run in full
#   make gettext  update the Chinese edition's catalogues (locale/zh_CN/LC_MESSAGES/*.po) from
#                 the sources, without running any example; translate, then `make html`
#   make clean    remove the build and the generated sources (keeps .venv)
#
# ATTENTION_GALLERY_PATTERN='04_' make html   runs only the scripts whose path matches
# (gallery/<part>/NN_name.py: '04_', or '1_foundations' for a whole part).
#
# The downloaded notebooks install the package's wheel from the site they came from, so the
# build writes the site's address into them: ATTENTION_SITE_URL, by default `make serve`'s
# http://127.0.0.1:8000/. To serve on another port, build for it:
#   ATTENTION_SITE_URL=http://127.0.0.1:8080/ make html && PORT=8080 make serve

VENV ?= .venv
PYTHON ?= python3
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8000
SPHINXOPTS ?=
PYTEST_WORKERS ?= 2

SPHINXBUILD := $(PY) -m sphinx -b html -W --keep-going -c . $(SPHINXOPTS) docs build/html
# The Chinese edition, into build/html/zh_CN: it runs no example, it reuses the English build's
# pages (docs/_ext/attention_i18n.py), so it comes second.
SPHINXBUILD_ZH := ATTENTION_LANGUAGE=zh_CN $(PY) -m sphinx -b html -W --keep-going -c . \
	$(SPHINXOPTS) docs build/html/zh_CN
# The messages of every page, for the catalogues; runs no example (the prose is in the scripts).
SPHINXBUILD_GETTEXT := ATTENTION_RUN_EXAMPLES=0 $(PY) -m sphinx -b gettext -W \
	--keep-going -c . $(SPHINXOPTS) docs build/gettext
GENERATED := build docs/tutorials docs/generated docs/sg_execution_times.rst

.PHONY: html test unit web-test lint serve bench robust downloads gettext clean venv

# The virtual environment: made once, refreshed when the requirements or the package metadata
# change.
# The widgets' JavaScript dependencies (ONNX Runtime Web), pinned by web/package-lock.json and
# installed as .venv is: once, and again when the lock file changes.
WEB_STAMP := web/node_modules/.installed
$(WEB_STAMP): web/package.json web/package-lock.json
	cd web && npm ci --no-audit --no-fund
	touch $@

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -r requirements.txt
	# The package was once installed as `attention`, a name PyPI gives to another project; it
	# is `attention-in-pytorch` now, and only one distribution may own the import name.
	$(PY) -m pip uninstall -y attention
	$(PY) -m pip install -e .
	touch $@

venv: $(STAMP)

# -W --keep-going: every warning is reported, and any warning or failing example fails the build.
# The languages `make html` builds: English, then the Chinese edition (`LANGUAGES=en` for English
# alone, as the build-behaviour tests' throwaway copies do).
LANGUAGES ?= en zh_CN

html: $(STAMP) $(WEB_STAMP)
	$(SPHINXBUILD)
ifneq ($(filter zh_CN,$(LANGUAGES)),)
	$(SPHINXBUILD_ZH)
endif

# The catalogues of the Chinese edition, updated from the sources: new and changed messages
# come in untranslated or fuzzy, and `make test` fails until each one is translated. The API
# reference and the computation-times tables are not translated (attention_i18n.UNTRANSLATED).
gettext: $(STAMP)
	$(SPHINXBUILD_GETTEXT)
	$(PY) docs/_ext/attention_i18n.py prune build/gettext
	$(PY) -m sphinx_intl update -p build/gettext -l zh_CN -d locale -w 0

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Unit tests, then the package's docstring examples and the pages' >>> examples as doctests.
unit: $(STAMP)
	$(PY) -m pytest -n $(PYTEST_WORKERS) tests/unit
	$(PY) -m pytest --doctest-modules attention --doctest-glob='*.rst' docs/index.rst

# A clean build, so every example runs again even if only the package changed. The build uses
# the default site address, and tests/site/test_stranger.py serves build/html there
# (127.0.0.1:8000) to install the wheel into a fresh environment: a running `make serve`
# holds that port, so stop it first.
# tests/docs: --dist loadgroup keeps the tests that share one build of a copy of the site on
# one worker (xdist_group), so that copy is built once.
# The Chinese build follows the English build, running nothing; a message without its
# translation fails it (docs/_ext/attention_i18n.py).
test: lint unit web-test
	rm -rf $(GENERATED)
	ATTENTION_GALLERY_PATTERN= ATTENTION_RUN_STALE=1 $(SPHINXBUILD)
	$(SPHINXBUILD_ZH)
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup tests/docs
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist worksteal tests/site

# The widgets' JavaScript, with node's own test runner.
web-test: $(WEB_STAMP)
	cd web && npm test

serve: $(STAMP)
	test -f build/html/index.html || $(MAKE) html
	$(PY) -m http.server --directory build/html --bind 127.0.0.1 $(PORT)

bench: $(STAMP)
	$(PY) -m benchmarks

# The claims of every page over seeds 0-9 and every CPU capability this machine has, then the
# pages that train on the 20 held-out seeds (sweep.HELD_OUT_SEEDS), which test the bounds and set
# none (several hours on 2 cores), then every download in full and every page in the browser.
# ROBUST_ARGS='--pages ^10_ --seeds 0-4' narrows the sweep.
robust: $(STAMP)
	$(PY) tests/docs/sweep.py --held-out $(ROBUST_ARGS)
	$(MAKE) downloads
	ATTENTION_PAGES_SAMPLE=all $(PY) -m pytest -n $(PYTEST_WORKERS) --dist worksteal \
		tests/site/test_accessibility.py tests/site/test_browser.py \
		-k "test_page_passes_axe or test_page_works_offline"

# Every notebook and script of the built site run in full, as a reader runs them (make test
# runs a sample); builds the site first when there is none.
downloads: $(STAMP)
	test -f build/html/index.html || $(MAKE) html
	ATTENTION_DOWNLOADS=all $(PY) -m pytest -n $(PYTEST_WORKERS) --dist worksteal \
		tests/site/test_downloads.py

clean:
	rm -rf $(GENERATED)
