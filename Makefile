# The project's commands; see README.md.
.PHONY: test dev dev-up dev-down bench

test: ## Every test: fmt, clippy, docs, template checks, the suite against DynamoDB Local, end to end
	bash scripts/test.sh

dev: ## The whole stack locally in the foreground (API on http://127.0.0.1:9000); Ctrl-C stops it
	bash scripts/dev.sh

dev-up: ## The same in the background, for scripts
	bash scripts/dev.sh up

dev-down: ## Stop what dev-up started
	bash scripts/dev.sh down

bench: ## Benchmarks beside @mbc-cqrs-serverless/core (Node), one run; rewrites BENCHMARKS.md
	bash scripts/bench.sh
