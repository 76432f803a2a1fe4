"""Each kind of source against its real server or tool: a local web site (tests/sites.py), a Git
repository made here with Debian's git, and moto's standalone S3 server in its own process."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from knowledge.models import Document
from knowledge.sources.connectors.base import ConfigError
from knowledge.sources.models import Source, SourceSync, SyncStatus
from knowledge.sources.services import syncing
from knowledge.sources.services.editing import source_create
from knowledge.sources.tasks import sync_source
from tests.conftest import World
from tests.servers import free_port, process, read_log, wait_for
from tests.sites import Page, Site, local_site


@pytest.fixture(autouse=True)
def media(settings: Any, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.QUARRY_SOURCE_WORK_DIR = str(tmp_path / "work")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return tmp_path


def sync(source: Source) -> SourceSync:
    syncing.source_sync_request(source=source)
    assert sync_source(source.pk) != "not run"
    return SourceSync.objects.filter(source=source).latest("started_at", "pk")


def counts(s: SourceSync) -> dict[str, int]:
    return {"added": s.added, "updated": s.updated, "unchanged": s.unchanged, "deleted": s.deleted, "failed": s.failed}


def documents(world: World) -> dict[str, Document]:
    return {d.external_id: d for d in Document.objects.filter(tenant=world.acme)}


# --- web ------------------------------------------------------------------------------------------


@pytest.fixture
def site() -> Iterator[Site]:
    with local_site() as site:
        site.html("/", "Home", "Welcome to the handbook.", ("/guide/", "/about", "/private/secret", "/missing", "/broken", "/old",
                                                            "/noindex", "http://example.invalid/elsewhere", "#top"))
        site.html("/guide/", "Guide", "The guide's index.", ("/guide/install", "/"))
        site.html("/guide/install", "Install", "Install the Marmalade package first.")
        site.html("/about", "About", "We are the lighthouse keepers.")
        site.html("/private/secret", "Secret", "Never crawl this.")
        site.pages["/broken"] = Page(b"<html>oops</html>", status=500, etag=False)
        site.pages["/old"] = Page(b"", status=301, headers={"Location": "/guide/moved"}, etag=False)
        site.html("/guide/moved", "Moved", "The page that moved here.")
        site.html("/noindex", "Draft", "A draft.", ("/hidden-child",), head='<meta name="robots" content="noindex">')
        site.html("/hidden-child", "Child", "Reached only through the draft.")
        site.html("/orphan", "Orphan", "Only the sitemap names the orphan page.")
        site.pages["/robots.txt"] = Page(b"User-agent: *\nDisallow: /private/\n", content_type="text/plain", etag=False)
        sitemap = f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>{site.base}/orphan</loc></url></urlset>'
        site.pages["/sitemap.xml"] = Page(sitemap.encode(), content_type="application/xml", etag=False)
        yield site


def web_source(world: World, site: Site, **config: Any) -> Source:
    return source_create(tenant=world.acme, name="Handbook", kind="web", actor="editor", config={
        "url": f"{site.base}/", "sitemaps": [f"{site.base}/sitemap.xml"], "delay_seconds": 0, **config})


def test_web_crawl_follows_links_honours_robots_noindex_and_reports_a_500(world: World, site: Site) -> None:
    source = web_source(world, site)
    first = sync(source)
    host = site.base.removeprefix("http://").replace(":", "-")
    paths = {"/", "/guide/", "/guide/install", "/about", "/guide/moved", "/hidden-child", "/orphan"}
    found = documents(world)
    assert {d.uri for d in found.values()} == {f"{site.base}{p}" for p in paths}
    assert f"handbook/{host}/guide/install" in found
    assert found[f"handbook/{host}/guide/install"].metadata == {"source": "handbook", "path": f"{site.base}/guide/install"}
    assert first.status == SyncStatus.PARTIAL
    assert counts(first) == {"added": 7, "updated": 0, "unchanged": 0, "deleted": 0, "failed": 1}
    assert first.errors == [{"item": f"{site.base}/broken", "reason": "HTTP 500"}]
    requested = {path for _, path, _, _ in site.log}
    assert "/private/secret" not in requested  # robots.txt
    assert not any("example.invalid" in path for path in requested)
    assert all("Quarry" in agent for _, _, _, agent in site.log)


def test_web_resync_asks_conditionally_and_fetches_only_changed_pages(world: World, site: Site) -> None:
    source = web_source(world, site)
    sync(source)
    site.log.clear()
    site.html("/about", "About", "We are the harbour masters now.")
    del site.pages["/guide/install"]  # 404 from now on
    site.html("/broken", "Fixed", "Working again.")
    second = sync(source)
    assert second.errors == []
    assert second.status == SyncStatus.SUCCEEDED
    assert counts(second) == {"added": 1, "updated": 1, "unchanged": 5, "deleted": 1, "failed": 0}
    full = set(site.full_fetches()) - {"/robots.txt", "/sitemap.xml", "/noindex"}  # a noindex page keeps no version
    assert full == {"/about", "/broken"}
    conditional = {path for method, path, status, _ in site.log if status == 304}
    assert {"/", "/guide/", "/orphan", "/guide/moved"} <= conditional
    host = site.base.removeprefix("http://").replace(":", "-")
    assert f"handbook/{host}/guide/install" not in documents(world)


def test_web_include_exclude_and_max_pages(world: World, site: Site) -> None:
    source = web_source(world, site, sitemaps=[], include=[r"/guide/"], exclude=[r"/guide/moved"], max_pages=3)
    first = sync(source)
    assert {d.uri for d in documents(world).values()} == {f"{site.base}/guide/", f"{site.base}/guide/install"}
    assert first.failed == 0 and first.errors == []


def test_web_crawl_stops_at_max_pages_and_says_so(world: World, site: Site) -> None:
    capped = sync(web_source(world, site, sitemaps=[], max_pages=3))
    assert len(documents(world)) == 3 and capped.added == 3
    assert capped.errors == [{"item": "", "reason": "stopped at max_pages (3): pages past it are not indexed"}]


@pytest.mark.parametrize("down", [{"/": 503, "/sitemap.xml": 503}, {"/": 404}], ids=["down", "start-gone"])
def test_web_start_url_down_or_gone_fails_the_listing_and_deletes_nothing(world: World, site: Site, down: dict[str, int]) -> None:
    source = web_source(world, site)
    sync(source)
    before = set(documents(world))
    for path, status in down.items():
        site.pages[path] = Page(b"down", status=status, etag=False)
    failed = sync(source)
    assert failed.status == SyncStatus.FAILED and failed.deleted == 0
    assert "nothing was deleted" in failed.errors[0]["reason"]
    assert set(documents(world)) == before


def test_web_bad_configuration_is_refused_naming_the_field(world: World, site: Site) -> None:
    for config, field in (({"url": "ftp://example.com/"}, "config.url"), ({"url": f"{site.base}/", "include": ["("]}, "config.include[0]"),
                          ({"url": f"{site.base}/", "max_pages": 0}, "config.max_pages"), ({"url": f"{site.base}/", "colour": 1}, "config.colour"),
                          ({"url": f"{site.base}/missing"}, "config.url")):
        with pytest.raises(ConfigError) as refused:
            source_create(tenant=world.acme, name="Bad", kind="web", config=config, actor="editor")
        assert refused.value.field == field, config
    assert not Source.objects.exists()


# --- git ------------------------------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "T",
                               "GIT_COMMITTER_EMAIL": "t@example.com", "HOME": str(repo), "PATH": "/usr/bin:/bin"}).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path, settings: Any) -> Path:
    settings.QUARRY_SOURCE_FOLDER_ROOTS = [str(tmp_path)]  # a repository on this server's disk is under a root
    repo = tmp_path / "handbook"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "docs").mkdir()
    for name in ("a", "b", "c", "d"):
        (repo / "docs" / f"{name}.md").write_text(f"# Page {name}\n\nThe text of page {name}.\n")
    (repo / "README.md").write_text("# Handbook\n")
    (repo / "build.sh").write_text("echo not content\n")
    git(repo, "add", ".")
    git(repo, "commit", "--quiet", "-m", "first")
    return repo


def test_git_resync_indexes_only_files_changed_between_commits(world: World, repo: Path) -> None:
    source = source_create(tenant=world.acme, name="Handbook repo", kind="git", actor="editor", config={
        "url": repo.as_uri(), "branch": "main", "include": ["docs/*.md", "README.md"],
        "uri_template": "https://git.example.com/org/handbook/blob/{commit}/{path}"})
    first = sync(source)
    head = git(repo, "rev-parse", "HEAD")
    assert counts(first) == {"added": 5, "updated": 0, "unchanged": 0, "deleted": 0, "failed": 0}
    assert documents(world)["handbook-repo/docs/a.md"].uri == f"https://git.example.com/org/handbook/blob/{head}/docs/a.md"
    assert Source.objects.get(pk=source.pk).cursor == {"commit": head}
    (repo / "docs" / "a.md").write_text("# Page a\n\nRewritten.\n")
    git(repo, "mv", "docs/b.md", "docs/b-renamed.md")
    git(repo, "rm", "--quiet", "docs/c.md")
    (repo / "docs" / "e.md").write_text("# Page e\n\nNew.\n")
    git(repo, "add", ".")
    git(repo, "commit", "--quiet", "-m", "second")
    second = sync(source)
    assert counts(second) == {"added": 2, "updated": 1, "unchanged": 2, "deleted": 2, "failed": 0}
    new_head = git(repo, "rev-parse", "HEAD")
    found = documents(world)
    assert set(found) == {"handbook-repo/README.md", "handbook-repo/docs/a.md", "handbook-repo/docs/b-renamed.md",
                          "handbook-repo/docs/d.md", "handbook-repo/docs/e.md"}
    assert found["handbook-repo/docs/e.md"].uri.endswith(f"/blob/{new_head}/docs/e.md")
    assert counts(sync(source)) == {"added": 0, "updated": 0, "unchanged": 5, "deleted": 0, "failed": 0}


def test_git_bad_url_or_branch_is_refused(world: World, repo: Path) -> None:
    with pytest.raises(ConfigError) as missing:
        source_create(tenant=world.acme, name="R", kind="git", config={"url": (repo.parent / "nope").as_uri()}, actor="e")
    assert missing.value.field == "config.url"
    with pytest.raises(ConfigError) as branch:
        source_create(tenant=world.acme, name="R", kind="git", config={"url": repo.as_uri(), "branch": "nope"}, actor="e")
    assert branch.value.field == "config.branch"
    with pytest.raises(ConfigError) as option:
        source_create(tenant=world.acme, name="R", kind="git", config={"url": "--upload-pack=touch /tmp/x"}, actor="e")
    assert option.value.field == "config.url"


# --- s3 -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """moto's standalone S3-compatible server, in its own process."""
    port = free_port()
    moto = Path(sys.executable).with_name("moto_server")
    with process([str(moto), "-H", "127.0.0.1", "-p", str(port)], {"PATH": "/usr/bin:/bin"}, "moto") as proc:
        endpoint = f"http://127.0.0.1:{port}"

        def up() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(read_log("moto"))
            try:
                return httpx.get(f"{endpoint}/moto-api/", timeout=1).status_code < 500
            except httpx.TransportError:
                return False

        wait_for(up, timeout=60, what="moto_server")
        yield endpoint


KEYS = {"access_key_id": "testing-key", "secret_access_key": "testing-secret-value"}


def test_s3_resync_downloads_only_objects_whose_etag_changed(world: World, s3_endpoint: str) -> None:
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", aws_access_key_id="testing-key",
                          aws_secret_access_key="testing-secret-value")
    client.create_bucket(Bucket="handbook")
    for name in ("one", "two", "three"):
        client.put_object(Bucket="handbook", Key=f"kb/{name}.md", Body=f"# {name}\n\nThe {name} page.\n".encode())
    client.put_object(Bucket="handbook", Key="elsewhere/x.md", Body=b"outside the prefix")
    source = source_create(tenant=world.acme, name="Bucket", kind="s3", actor="editor", config={
        "endpoint_url": s3_endpoint, "bucket": "handbook", "prefix": "kb/", **KEYS})
    assert "testing-secret-value" not in Source.objects.get(pk=source.pk).secrets
    first = sync(source)
    assert counts(first) == {"added": 3, "updated": 0, "unchanged": 0, "deleted": 0, "failed": 0}
    assert documents(world)["bucket/kb/one.md"].uri == f"{s3_endpoint}/handbook/kb/one.md"
    client.put_object(Bucket="handbook", Key="kb/one.md", Body=b"# one\n\nChanged.\n")
    client.put_object(Bucket="handbook", Key="kb/two.md", Body=b"# two\n\nThe two page.\n")  # same bytes, same ETag
    client.delete_object(Bucket="handbook", Key="kb/three.md")
    client.put_object(Bucket="handbook", Key="kb/four.md", Body=b"# four\n")
    second = sync(source)
    assert counts(second) == {"added": 1, "updated": 1, "unchanged": 1, "deleted": 1, "failed": 0}
    assert set(documents(world)) == {"bucket/kb/one.md", "bucket/kb/two.md", "bucket/kb/four.md"}


def test_s3_bucket_that_cannot_be_listed_is_refused(world: World, s3_endpoint: str) -> None:
    with pytest.raises(ConfigError) as refused:
        source_create(tenant=world.acme, name="Nope", kind="s3", actor="e", config={
            "endpoint_url": s3_endpoint, "bucket": "no-such-bucket", **KEYS})
    assert refused.value.field == "config.bucket" and "NoSuchBucket" in refused.value.message
    with pytest.raises(ConfigError) as half:
        source_create(tenant=world.acme, name="Half", kind="s3", actor="e", config={"bucket": "handbook", "access_key_id": "k"})
    assert half.value.field == "config.secret_access_key"
    assert not Source.objects.exists()


def test_a_repository_on_this_servers_disk_must_be_under_the_folder_roots(world: World, repo: Path, settings: Any, tmp_path: Path) -> None:
    """A file:// URL or a path reads whatever the server's user can read: local repositories obey the roots
    folder sources obey, at creation and again at each sync (the roots may change)."""
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    shutil.copytree(repo, elsewhere)
    for url in (elsewhere.as_uri(), str(elsewhere), f"{repo.as_uri()}/../../{tmp_path.name}-elsewhere"):
        with pytest.raises(ConfigError) as refused:
            source_create(tenant=world.acme, name="R", kind="git", config={"url": url}, actor="e")
        assert refused.value.field == "config.url" and "outside the folders sources may read" in refused.value.message, url
    settings.QUARRY_SOURCE_FOLDER_ROOTS = []
    with pytest.raises(ConfigError, match="QUARRY_SOURCE_FOLDER_ROOTS"):
        source_create(tenant=world.acme, name="R", kind="git", config={"url": repo.as_uri()}, actor="e")
    settings.QUARRY_SOURCE_FOLDER_ROOTS = [str(tmp_path)]
    source = source_create(tenant=world.acme, name="R", kind="git", config={"url": repo.as_uri()}, actor="e")
    settings.QUARRY_SOURCE_FOLDER_ROOTS = [str(elsewhere)]  # the server's roots changed: the next sync reads nothing
    run = sync(source)
    assert run.status == SyncStatus.FAILED and "outside the folders sources may read" in run.errors[0]["reason"]
    assert not documents(world)


# --- addresses no source may reach ---------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "config", "field"), [
    ("web", {"url": "http://169.254.169.254/latest/meta-data/"}, "config.url"),
    ("web", {"url": "http://127.0.0.1:9/", "sitemaps": ["http://[fe80::1]/sitemap.xml"]}, "config.sitemaps[0]"),
    ("web", {"url": "http://[::ffff:169.254.169.254]/"}, "config.url"),  # the IPv4 host, written as IPv6
    ("web", {"url": "http://2852039166/"}, "config.url"),  # 169.254.169.254 as one number, as resolvers read it
    ("git", {"url": "https://169.254.169.254/org/repo.git"}, "config.url"),
    ("s3", {"bucket": "handbook", "endpoint_url": "http://169.254.169.254", **{"access_key_id": "k", "secret_access_key": "s"}},
     "config.endpoint_url"),
])
def test_a_source_may_not_name_a_link_local_or_metadata_address(world: World, kind: str, config: dict[str, Any], field: str) -> None:
    """169.254.169.254 hands out a cloud host's credentials: no source may fetch from it (an editor's sync
    would index them), nor from the rest of QUARRY_SOURCE_BLOCKED_NETWORKS; the refusal names the field."""
    with pytest.raises(ConfigError) as refused:
        source_create(tenant=world.acme, name="Metadata", kind=kind, config=config, actor="editor")
    assert refused.value.field == field and "an address sources may not reach" in refused.value.message
    assert not Source.objects.filter(tenant=world.acme).exists()


def test_a_web_sync_checks_the_address_before_each_request(world: World, site: Site, settings: Any) -> None:
    """A name can resolve elsewhere at sync time than when the source was made: every request is checked."""
    source = web_source(world, site)
    settings.QUARRY_SOURCE_BLOCKED_NETWORKS = ["127.0.0.0/8"]  # the site's address, blocked after the source was made
    failed = sync(source)
    assert failed.status == SyncStatus.FAILED and "an address sources may not reach" in failed.errors[0]["reason"], failed.errors
    assert not documents(world)
    settings.QUARRY_SOURCE_BLOCKED_NETWORKS = []  # nothing refused: the same source syncs
    assert sync(source).status in (SyncStatus.SUCCEEDED, SyncStatus.PARTIAL)
