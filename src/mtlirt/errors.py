"""Errors raised for bad input."""


class InputError(ValueError):
    """Bad input data: the message names the rows, columns or values at fault.

    The CLI prints the message on one line and exits with status 2.
    """
