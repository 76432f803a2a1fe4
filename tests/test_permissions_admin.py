"""Access lists edited on the admin's document page (issue 34): the change form's "Readable by" fields.

The page shows the document's groups and users as chosen, and saving a change rewrites the document's
and its chunks' lists at once (audited, nothing processed again). A save that leaves the fields alone
keeps the list as it is, even one naming a deleted group, which no choice can show.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from accounts.models import Group
from knowledge.models import AuditEvent, Chunk, Document
from tests.test_permissions import Team, search, team  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


def _change_form(document: Document, **access: list[int]) -> dict[str, object]:
    """The change page's fields as a browser posts them, with ``access_groups`` / ``access_users`` as given."""
    return {"title": document.title, "uri": document.uri, "metadata": "{}", "text": document.source_text or document.text,
            **access}


def _client(user: User) -> Client:
    User.objects.filter(pk=user.pk).update(is_staff=True)
    client = Client()
    client.force_login(User.objects.get(pk=user.pk))
    return client


def test_the_change_page_shows_and_changes_who_may_read_a_document(team: Team) -> None:  # noqa: F811
    w = team.world
    owner = _client(w.owner)
    handbook = Document.objects.get(external_id="handbook")
    url = f"/admin/knowledge/document/{handbook.pk}/change/"
    page = owner.get(url).content.decode()
    assert 'name="access_groups"' in page and 'name="access_users"' in page
    assert f'<option value="{team.group.pk}">payroll</option>' in page  # the tenant's groups to choose from
    assert "stranger" in page  # and its members

    saved = owner.post(url, _change_form(handbook, access_groups=[team.group.pk]))
    assert saved.status_code == 302, saved.content.decode()[:2000]
    principal = f"g:{team.group.pk}"
    assert Document.objects.get(pk=handbook.pk).access == [principal]
    chunks = list(Chunk.objects.filter(document=handbook).values_list("access", flat=True))
    assert chunks and all(a == [principal] for a in chunks)
    assert Document.objects.get(pk=handbook.pk).version == handbook.version  # nothing processed again
    assert AuditEvent.objects.filter(action="access", document_ids=["handbook"]).exists()
    # Effective at once: the stranger, outside the group, no longer finds it; the group's member does.
    assert "handbook" not in search(team, team.stranger, "payroll calendar portal", "keyword")
    assert "handbook" in search(team, w.teammate, "payroll calendar portal", "keyword")
    # The page now shows the group as chosen; emptying both fields opens it to the whole tenant again.
    assert f'<option value="{team.group.pk}" selected>payroll</option>' in owner.get(url).content.decode()
    owner.post(url, _change_form(Document.objects.get(pk=handbook.pk), access_groups=[], access_users=[]))
    assert Document.objects.get(pk=handbook.pk).access == ["*"]
    assert "handbook" in search(team, team.stranger, "payroll calendar portal", "keyword")


def test_a_save_that_leaves_access_alone_keeps_a_list_naming_a_deleted_group(team: Team) -> None:  # noqa: F811
    """A document restricted to a group that was then deleted reads for admins only; saving its title must
    not open it to the whole tenant because the deleted group is no choice the page can show."""
    owner = _client(team.world.owner)
    payroll = Document.objects.get(external_id="payroll/2026")
    board = Group.objects.create(tenant=team.world.acme, name="board")
    gone = f"g:{board.pk}"
    Document.objects.filter(pk=payroll.pk).update(access=[gone, f"g:{team.group.pk}"])
    Chunk.objects.filter(document=payroll).update(access=[gone, f"g:{team.group.pk}"])
    board.delete()
    url = f"/admin/knowledge/document/{payroll.pk}/change/"
    assert "1 deleted group(s) or former member(s)" in owner.get(url).content.decode()
    saved = owner.post(url, {**_change_form(payroll, access_groups=[team.group.pk]), "title": "Payroll 2026 (renamed)"})
    assert saved.status_code == 302
    assert Document.objects.get(pk=payroll.pk).access == [gone, f"g:{team.group.pk}"]
    # Taking the last visible group off keeps the deleted one: only admins read it then, not the whole tenant.
    owner.post(url, _change_form(Document.objects.get(pk=payroll.pk), access_groups=[]))
    assert Document.objects.get(pk=payroll.pk).access == [gone]
    assert "payroll/2026" not in search(team, team.stranger, "Zebediah Quill salary payroll", "keyword")
    assert "payroll/2026" not in search(team, team.world.teammate, "Zebediah Quill salary payroll", "keyword")


def test_an_editor_cannot_choose_groups_of_another_tenant(team: Team) -> None:  # noqa: F811
    w = team.world
    theirs = Group.objects.create(tenant=w.globex, name="globex-staff")
    owner = _client(w.owner)
    handbook = Document.objects.get(external_id="handbook")
    refused = owner.post(f"/admin/knowledge/document/{handbook.pk}/change/", _change_form(handbook, access_groups=[theirs.pk]))
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    assert Document.objects.get(pk=handbook.pk).access == ["*"]


def test_the_admin_lists_one_groups_page_quarrys(team: Team) -> None:  # noqa: F811
    """Django's permission groups did nothing in Quarry and sat beside its groups as a second "Groups"."""
    User.objects.filter(pk=team.world.owner.pk).update(is_superuser=True)
    index = _client(team.world.owner).get("/admin/").content.decode()
    assert "/admin/accounts/group/" in index and "/admin/auth/group/" not in index
    assert "/admin/auth/user/" in index  # the users stay


def test_saving_the_page_unchanged_from_a_browser_queues_no_new_version(team: Team) -> None:  # noqa: F811
    """A browser sends a textarea's line ends as CRLF: saving only the access list (or nothing) must not
    read as a new text and process the document again."""
    handbook = Document.objects.get(external_id="handbook")
    Document.objects.filter(pk=handbook.pk).update(source_text="Employee handbook.\nHolidays are booked in the portal.\n")
    handbook.refresh_from_db()
    form = _change_form(handbook, access_users=[team.world.teammate.pk])
    form["text"] = str(form["text"]).replace("\n", "\r\n")
    assert _client(team.world.owner).post(f"/admin/knowledge/document/{handbook.pk}/change/", form).status_code == 302
    after = Document.objects.get(pk=handbook.pk)
    assert (after.status, after.version, after.source_text) == (handbook.status, handbook.version, handbook.source_text)
    assert after.access == [f"u:{team.world.teammate.pk}"]
