"""Errors the command line turns into exit codes."""


class UserError(Exception):
    """A mistake in arguments, configuration, input or output location: exit code 2.

    The message is shown to the user as is, without a traceback, so it must say what is wrong
    and, where it can, what to do.
    """


EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USER_ERROR = 2
