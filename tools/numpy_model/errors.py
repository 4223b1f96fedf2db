"""The errors that make the checker exit with code 2."""


class CheckError(ValueError):
    """Base class of every error that makes the checker exit with code 2."""


class ModelFileError(CheckError):
    """The model file is malformed or does not describe a supported model."""


class DataFileError(CheckError):
    """A test data file is missing or malformed."""
