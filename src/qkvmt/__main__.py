"""python -m qkvmt: the same as the `qkvmt` command."""

from qkvmt.cli.main import main

if __name__ == "__main__":
    main()
