"""People in a real browser (Playwright driving Debian's Chromium), on desktop and on a 390 px phone:
the admin invites an organiser and two participants of one team; each joins through their link in
a browser of their own; one participant creates an API token (shown once, not again on reload);
the admin makes a password-reset link and the participant chooses a new password with it. No
terminal anywhere."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from evalstore.services import access
from evalstore.web.app import create_app
from evalstore.web.settings import ServerSettings
from tests.browser.axe import axe_violations
from tests.browser.test_pages_in_a_browser import PASSWORD, browser_page, shot, sign_in
from tests.http.conftest import serving

__all__ = ["browser_page"]
CONFIRM = "main form:has(input[name=confirm]) button[type=submit]"


@pytest.fixture
def service(sqlite_engine: Engine) -> Iterator[str]:
    access.add_user(sqlite_engine, "ada", role="admin", password=PASSWORD)
    url = sqlite_engine.url.render_as_string(hide_password=False)
    settings = ServerSettings(database_url=url, secure_cookies=False, writes_per_minute=1000)
    with serving(create_app(settings)) as site:
        yield site


def no_sideways_scroll(page: object, what: str, width: int) -> None:
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")  # type: ignore[attr-defined]
    assert overflow <= 0, f"{what} scrolls sideways by {overflow} px at {width} px"


def make_invite(page: object, role: str, team: str) -> str:
    page.select_option("#role", role)  # type: ignore[attr-defined]
    page.fill("#team", team)  # type: ignore[attr-defined]
    page.click("text=Make an invite link")  # type: ignore[attr-defined]
    page.wait_for_selector("#shown-link")  # type: ignore[attr-defined]
    return str(page.inner_text("#shown-link"))  # type: ignore[attr-defined]


def join(browser: object, link: str, name: str, width: int, *, screenshot: bool = False) -> object:
    """A new browser of the invitee's own: opens the link, chooses a name and password."""
    context = browser.new_context(viewport={"width": width, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    page.goto(link)
    if screenshot:
        shot(page, f"people-join-{width}")
        assert axe_violations(page) == []
        no_sideways_scroll(page, "the invite's page", width)
    page.fill("#name", name)
    page.fill("#password", PASSWORD)
    page.fill("#again", PASSWORD)
    page.click("text=Join and sign in")
    page.wait_for_url(link.split("/join/")[0] + "/profile")
    return page


@pytest.mark.parametrize("width", [1280, 390])
def test_an_admin_brings_people_in_without_a_terminal(
    service: str, sqlite_engine: Engine, browser_page: object, width: int
) -> None:
    admin = browser_page
    admin.set_viewport_size({"width": width, "height": 900})  # type: ignore[attr-defined]
    sign_in(admin, service, "ada", "/people")
    olga_link = make_invite(admin, "organiser", "")
    shot(admin, f"people-invite-shown-{width}")
    assert axe_violations(admin) == []  # type: ignore[arg-type]
    no_sideways_scroll(admin, "the people page", width)
    admin.reload()  # type: ignore[attr-defined]
    assert admin.locator("#shown-link").count() == 0  # type: ignore[attr-defined]  # shown once
    pat_link = make_invite(admin, "participant", "uni-a")
    sam_link = make_invite(admin, "participant", "uni-a")
    assert len({olga_link, pat_link, sam_link}) == 3 and all("/join/inv_" in link for link in (pat_link, sam_link))

    browser = admin.context.browser  # type: ignore[attr-defined]
    olga = join(browser, olga_link, "olga", width, screenshot=True)
    assert "olga organiser" in olga.inner_text("h1")  # type: ignore[attr-defined]
    pat = join(browser, pat_link, "pat", width)
    sam = join(browser, sam_link, "sam", width)
    assert "sam participant, team uni-a" in sam.inner_text("h1")  # type: ignore[attr-defined]

    again = browser.new_context().new_page()  # the link once more: refused, with a page that says why
    response = again.goto(pat_link)
    assert response.status == 404
    assert again.inner_text("p.error") == (
        "This invite link has been used already; each link works once. Ask the server's admin for a new one."
    )
    shot(again, f"people-link-used-{width}")

    pat.fill("#expires_days", "30")  # type: ignore[attr-defined]
    pat.click("text=Create a token")  # type: ignore[attr-defined]
    pat.wait_for_url(f"{service}/profile")  # type: ignore[attr-defined]
    token = pat.inner_text("code.token")  # type: ignore[attr-defined]
    assert token.startswith("es_")
    shot(pat, f"people-token-shown-{width}")
    assert axe_violations(pat) == []  # type: ignore[arg-type]
    pat.reload()  # type: ignore[attr-defined]
    assert pat.locator("code.token").count() == 0  # type: ignore[attr-defined]
    assert len(access.list_tokens(sqlite_engine, "pat")) == 1  # the reload made no second one
    sam.reload()  # type: ignore[attr-defined]
    assert "pat" in sam.inner_text("main")  # type: ignore[attr-defined]  # the teammate's token is listed

    admin.goto(f"{service}/people")  # type: ignore[attr-defined]
    teams = admin.inner_text("main")  # type: ignore[attr-defined]
    assert "sam (participant)" in teams and "pat (participant)" in teams
    admin.click("button[aria-label='Make a password-reset link for pat']")  # type: ignore[attr-defined]
    admin.wait_for_selector("#shown-link")  # type: ignore[attr-defined]
    reset_link = admin.inner_text("#shown-link")  # type: ignore[attr-defined]
    assert "/reset/pwr_" in reset_link
    shot(admin, f"people-teams-{width}")

    pat.goto(reset_link)  # type: ignore[attr-defined]
    assert pat.inner_text("h1") == "A new password for pat"  # type: ignore[attr-defined]
    shot(pat, f"people-reset-{width}")
    assert axe_violations(pat) == []  # type: ignore[arg-type]
    no_sideways_scroll(pat, "the reset page", width)
    pat.fill("#password", "an even longer new password")  # type: ignore[attr-defined]
    pat.fill("#again", "an even longer new password")  # type: ignore[attr-defined]
    pat.click("text=Set the password and sign in")  # type: ignore[attr-defined]
    pat.wait_for_url(f"{service}/profile")  # type: ignore[attr-defined]
    assert "pat participant, team uni-a" in pat.inner_text("h1")  # type: ignore[attr-defined]


@pytest.mark.parametrize("width", [1280, 390])
def test_a_visitor_asks_for_an_account_and_the_admin_approves_it(
    sqlite_engine: Engine, browser_page: object, width: int
) -> None:
    access.add_user(sqlite_engine, "ada", role="admin", password=PASSWORD)
    url = sqlite_engine.url.render_as_string(hide_password=False)
    settings = ServerSettings(database_url=url, secure_cookies=False, writes_per_minute=1000, open_sign_up=True)
    page = browser_page
    page.set_viewport_size({"width": width, "height": 900})  # type: ignore[attr-defined]
    with serving(create_app(settings)) as site:
        page.goto(f"{site}/login")  # type: ignore[attr-defined]
        page.click("text=Ask for one")  # type: ignore[attr-defined]
        page.fill("#name", "vic")  # type: ignore[attr-defined]
        page.fill("#team", "uni-b")  # type: ignore[attr-defined]
        page.fill("#password", PASSWORD)  # type: ignore[attr-defined]
        page.fill("#again", PASSWORD)  # type: ignore[attr-defined]
        shot(page, f"people-sign-up-{width}")
        assert axe_violations(page) == []  # type: ignore[arg-type]
        no_sideways_scroll(page, "the sign-up page", width)
        page.click("text=Ask for the account")  # type: ignore[attr-defined]
        page.wait_for_url(f"{site}/sign-up?asked=vic")  # type: ignore[attr-defined]
        assert "is with the server's admin" in page.inner_text("main")  # type: ignore[attr-defined]

        admin = page.context.browser.new_context(viewport={"width": width, "height": 900}).new_page()  # type: ignore[attr-defined]
        sign_in(admin, site, "ada", "/people")
        shot(admin, f"people-requests-{width}")
        assert axe_violations(admin) == []
        admin.click("button[aria-label='Approve vic']")
        admin.wait_for_url(f"{site}/people")
        assert admin.locator("button[aria-label='Approve vic']").count() == 0

        sign_in(page, site, "vic", "/profile")
        assert "vic participant, team uni-b" in page.inner_text("h1")  # type: ignore[attr-defined]
