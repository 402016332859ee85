# The two commands of the README. Everything else is in scripts/setup and the kith CLI.
.PHONY: run test lock lint

run:        ## set up (virtualenv + locked deps) and run the daemon with the defaults
	scripts/setup
	.venv/bin/kith run

test:       ## set up (incl. chromium for the browser test) and run the default test suite
	scripts/setup --test
	KITH_REQUIRE_BROWSER=1 scripts/test

lint:
	.venv/bin/ruff check .

lock:       ## re-pin requirements.lock from pyproject.toml (needs uv in the venv)
	.venv/bin/uv pip compile pyproject.toml --extra dev --extra matrix --extra slack --extra web --extra calendar --extra email --generate-hashes --python-version 3.11 -q -o requirements.lock
