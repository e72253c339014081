import pytest

from documents.reading import extract_limits


@pytest.fixture
def limits():
    """The extraction limits the settings give (documents.reading), as the stage passes them."""
    return extract_limits()
