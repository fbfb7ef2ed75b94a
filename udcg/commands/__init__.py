"""One module per CLI command. Each exposes ``add_parser(subparsers)``, which registers the
command and sets ``func`` to a ``main(args) -> int``. Modules import nothing heavy at module level
(no torch / transformers), so ``udcg --help`` stays fast."""
