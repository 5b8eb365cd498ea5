"""Writing Hudi files: base files, log files and the commits that make them visible."""
