"""The command line: main (the `qkvmt` command and `python -m qkvmt`, running a subcommand by
name), table (the subcommands as data: COMMANDS) and hydra_main (the Hydra main every subcommand
runs under, over the packaged configuration).

main sits at the top of the layers, beside the pipeline functions it runs; table and hydra_main
sit at the bottom, as the record's Markdown reads the table: this package's __init__ imports
nothing, so that either half can be imported without the other."""
