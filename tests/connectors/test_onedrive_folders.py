"""The folder a person connects: found by the path they name, with the tokens of the
sign-in they just made, against the local Graph."""

import time

import pytest

from connectors.base import ProviderError
from connectors.onedrive_folders import folder_resolve
from connectors.onedrive_graph import OneDriveConfig, Tokens
from tests.support.files import make_pdf
from tests.support.graph_server import DRIVE_ID, ROOT_ID, graph_fixture

graph = graph_fixture()


def signed_in(graph) -> Tokens:
    answer = graph.issue_tokens()
    return Tokens(
        answer["access_token"], answer["refresh_token"], time.time() + answer["expires_in"]
    )


def resolve(graph, path: str, tokens: Tokens | None = None) -> tuple[str, str]:
    tokens = tokens or signed_in(graph)
    return folder_resolve(config=OneDriveConfig.from_settings(), tokens=tokens, path=path)


def test_the_drive_and_the_folder_a_path_names_are_found(graph):
    contracts = graph.folder("Documents/Contracts")

    assert resolve(graph, "/Documents/Contracts") == (DRIVE_ID, contracts)
    assert resolve(graph, "/") == (DRIVE_ID, ROOT_ID)


@pytest.mark.parametrize(
    "path, why",
    [
        ("/Nowhere", "There is no folder /Nowhere in your OneDrive."),
        ("/Contracts/a.pdf", "/Contracts/a.pdf is a file in your OneDrive, not a folder."),
    ],
)
def test_a_missing_folder_or_a_file_is_said_in_plain_words(graph, path, why):
    graph.put("Contracts/a.pdf", make_pdf(1))

    with pytest.raises(ProviderError) as refused:
        resolve(graph, path)

    assert refused.value.message == why


def test_a_sign_in_graph_refuses_is_not_refreshed_but_said(graph):
    graph.folder("Contracts")
    tokens = signed_in(graph)
    graph.expire_access_tokens()

    with pytest.raises(ProviderError, match="refused the new sign-in"):
        resolve(graph, "/Contracts", tokens)

    assert graph.state.token_grants == []  # no refresh was asked for
