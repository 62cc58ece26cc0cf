# The project's commands. `make test` runs every test; see README.md.
.PHONY: test

test: ## Run every test: fmt, clippy, docs, and the test suite against DynamoDB Local
	bash scripts/test.sh
