"""One module per notebook's study: rows, key tables and findings of 02-07, on the core harness."""
