"""report.html of a finished run: data, figures, HTML."""
