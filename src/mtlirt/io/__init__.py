"""Reading, validating and writing: tables, `Responses`, fit folders, importers."""
