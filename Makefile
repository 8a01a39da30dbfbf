# Convenience targets; the scripts they call are the real commands.
.PHONY: build test demo clean

build:
	cargo build --release

test:
	bash tests/run.sh

demo:
	bash tests/demo.sh

clean:
	cargo clean
