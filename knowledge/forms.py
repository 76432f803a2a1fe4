"""Forms of the knowledge base: the admin's upload, edit and search-playground forms, and the
search page's filter syntax. Validation uses the RAG API's own rules and messages."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.admin.widgets import FilteredSelectMultiple
from django.contrib.auth import get_user_model
from django.utils.html import format_html

from accounts.models import Group, Tenant
from common.parsers import BoundedJSONFormField
from knowledge import rag
from knowledge.extraction import SUPPORTED
from knowledge.models import Document
from knowledge.rag import limits
from knowledge.rag.types import EVERYONE, check_filters, check_metadata, group_principal, user_principal
from knowledge.services.documents import DocumentInputError


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """One or many files; empty files pass (the pipeline fails them with a reason)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        kwargs.setdefault("allow_empty_file", True)
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> list[Any]:
        if isinstance(data, (list, tuple)):
            return [super(MultipleFileField, self).clean(item, initial) for item in data if item]
        return [super().clean(data, initial)] if data else []


def clean_metadata_value(value: Any) -> dict[str, object]:
    """Metadata from a JSON form field: an object of scalar values (the RAG API's rule)."""
    try:
        return dict(check_metadata({} if value in (None, "") else value))
    except (rag.RAGValidationError, rag.RAGTypeError) as exc:
        raise forms.ValidationError(f"{exc.field}: {exc.message}") from None


METADATA_HELP = 'A JSON object of scalar values (text, numbers, true/false), e.g. {"team": "support", "year": 2025}.'


def add_input_error(form: forms.Form, exc: DocumentInputError) -> None:
    """Show a service's refusal on the form field it names (metadata.<x> on metadata)."""
    field = exc.field.split(".", 1)[0].split(" ", 1)[0]
    field = {"ids": "external_id"}.get(field, field)
    if field in form.fields:
        form.add_error(field, exc.message if field == exc.field else f"{exc.field}: {exc.message}")
    else:
        form.add_error(None, str(exc))


class PastedTextField(forms.CharField):
    """A document's text from a textarea, with the line ends the reader typed: browsers send every line
    end of a textarea as CRLF, so a page saved unchanged read as a new text and was processed again."""

    def to_python(self, value: Any) -> str:
        return super().to_python(value).replace("\r\n", "\n")


class DocumentUploadForm(forms.Form):
    tenant = forms.ModelChoiceField(queryset=Tenant.objects.none(), empty_label=None)
    files = MultipleFileField(required=False)
    text = PastedTextField(
        required=False, strip=False, widget=forms.Textarea(attrs={"rows": 8, "class": "vLargeTextField"}),
        label="Or paste text", help_text="Instead of files: the text of one document.",
    )
    external_id = forms.CharField(
        required=False, max_length=200, label="Document id",
        help_text="Optional for a single document (default: from the file name, or the title of pasted text). "
        "An id given here gets a new version whatever holds it; without one, a file replaces only the document of the same file name.",
    )
    title = forms.CharField(required=False, max_length=limits.MAX_TITLE_CHARS, help_text="Single document only; default: from the file.")
    uri = forms.CharField(required=False, max_length=limits.MAX_URI_CHARS, label="URI", help_text="Single document only: where it lives.")
    metadata = BoundedJSONFormField(required=False, initial=dict, widget=forms.Textarea(attrs={"rows": 3}), help_text=METADATA_HELP)

    def __init__(self, *args: Any, tenants: Sequence[Tenant], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Read at each render: the limit is a setting, and editors meet the bounds here first.
        self.fields["files"].help_text = f"One or many files: {SUPPORTED}. {limits.editor_bounds(settings.QUARRY_UPLOAD_MAX_BYTES)}"
        self.fields["tenant"].queryset = Tenant.objects.filter(pk__in=[t.pk for t in tenants])
        if len(tenants) == 1:
            self.fields["tenant"].initial = tenants[0]

    def clean_metadata(self) -> dict[str, object]:
        return clean_metadata_value(self.cleaned_data.get("metadata"))

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        files, text = data.get("files") or [], data.get("text") or ""
        if files and text.strip():
            raise forms.ValidationError("Upload files or paste text, not both.")
        if not files and not text.strip():
            raise forms.ValidationError("Choose at least one file, or paste some text.")
        if len(files) > 1:
            for field in ("external_id", "title", "uri"):
                if data.get(field):
                    self.add_error(field, "Applies to a single document; with several files each takes its id and title from the file.")
        if text.strip() and not (data.get("external_id") or data.get("title")):
            self.add_error("external_id", "Give pasted text a document id or a title.")
        return data


class AccessPicker(FilteredSelectMultiple):
    """The admin's two-list picker, in a box of its own: its script builds the picker at the start of the
    select's parent, which without this box is the row itself, and the field's label then came after it."""

    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None) -> str:
        return format_html("<div>{}</div>", super().render(name, value, attrs, renderer))


class DocumentChangeForm(forms.ModelForm):
    text = PastedTextField(
        required=False, strip=False, widget=forms.Textarea(attrs={"rows": 12, "class": "vLargeTextField"}),
        help_text="The document's text. Saving a change queues a new version.",
    )
    replace_file = forms.FileField(required=False, allow_empty_file=True, help_text="Upload a new version of the file.")
    metadata = BoundedJSONFormField(required=False, widget=forms.Textarea(attrs={"rows": 3}), help_text=METADATA_HELP)

    # Who may read it (issue 34): groups and members of the document's tenant; both empty, the whole tenant.
    access_groups = forms.ModelMultipleChoiceField(
        queryset=Group.objects.none(), required=False, label="Readable by groups",
        widget=AccessPicker("groups", is_stacked=False),
        help_text="Members of these groups (and the users below) may read it; with both empty, the whole tenant may. "
                  "Tenant admins always read everything. Changing it takes effect at once, without processing again.",
    )
    access_users = forms.ModelMultipleChoiceField(
        queryset=get_user_model().objects.none(), required=False, label="Readable by users",
        widget=AccessPicker("users", is_stacked=False),
    )

    class Meta:
        model = Document
        fields = ["title", "uri", "metadata"]
        widgets = {"metadata": forms.Textarea(attrs={"rows": 3})}
        help_texts = {"metadata": METADATA_HELP}
        labels = {"uri": "URI"}

    @staticmethod
    def edits_text(document: Document) -> bool:
        """Whether the form edits the document's text: not when its source is a file (replace that)."""
        return not (document.pk and document.source_file)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        document = self.instance
        if not self.edits_text(document):
            del self.fields["text"]
        elif not self.is_bound:
            # The admin lists `text` among the form's fields, so the model's `text` (empty until a
            # version lands) would be the initial value: a queued paste would open blank.
            self.initial["text"] = document.source_text or document.text
        if document.pk:
            self.fields["access_groups"].queryset = Group.objects.filter(tenant_id=document.tenant_id).order_by("name")
            self.fields["access_groups"].label_from_instance = lambda group: group.name  # one tenant's: no "@ tenant"
            self.fields["access_users"].queryset = (get_user_model().objects
                                                   .filter(memberships__tenant_id=document.tenant_id).order_by("username"))
            principals = list(document.access or [])
            groups = set(self.fields["access_groups"].queryset.values_list("pk", flat=True))
            users = set(self.fields["access_users"].queryset.values_list("pk", flat=True))
            self.initial["access_groups"] = [int(p[2:]) for p in principals if p.startswith("g:") and int(p[2:]) in groups]
            self.initial["access_users"] = [int(p[2:]) for p in principals if p.startswith("u:") and int(p[2:]) in users]
            # A deleted group or a user who left the tenant is no choice, but still restricts the document
            # (it names nobody): kept through any save, so that clearing the visible choices can never open
            # to the whole tenant a document only admins could read.
            self.kept_principals = [p for p in principals if p != EVERYONE and int(p[2:]) not in (groups if p[0] == "g" else users)]
            if self.kept_principals:
                self.fields["access_groups"].help_text += (
                    f" It also names {len(self.kept_principals)} deleted group(s) or former member(s): they name nobody, "
                    "so the document stays restricted even with both fields empty (use the list's Set access action to open it).")

    kept_principals: list[str] = []

    def access_changed(self) -> bool:
        """Whether the user changed who may read it: only then is the list written."""
        return bool({"access_groups", "access_users"} & set(self.changed_data))

    def access_principals(self) -> list[str]:
        """The chosen access list as principals, with ``kept_principals``; ``[EVERYONE]`` when that is empty."""
        chosen = [group_principal(g.pk) for g in self.cleaned_data.get("access_groups") or []]
        chosen += [user_principal(u.pk) for u in self.cleaned_data.get("access_users") or []]
        return chosen + self.kept_principals or [EVERYONE]

    def clean_metadata(self) -> dict[str, object]:
        return clean_metadata_value(self.cleaned_data.get("metadata"))

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if "text" in self.fields and not data.get("replace_file") and not (data.get("text") or "").strip():
            self.add_error("text", "The text must not be empty.")
        return data


class SearchForm(forms.Form):
    tenant = forms.ModelChoiceField(queryset=Tenant.objects.none(), empty_label=None)
    query = forms.CharField(max_length=limits.MAX_QUERY_CHARS, strip=False, widget=forms.TextInput(attrs={"size": 60}))
    mode = forms.ChoiceField(choices=[(m.value, m.value) for m in rag.SearchMode], initial=rag.SearchMode.HYBRID.value)
    limit = forms.IntegerField(min_value=1, max_value=limits.MAX_LIMIT, initial=10)
    filters = BoundedJSONFormField(
        required=False, initial=dict, widget=forms.Textarea(attrs={"rows": 2}),
        help_text='Metadata filters, e.g. {"team": "support", "year": [2024, 2025]}: equality, or any of a list.',
    )
    min_score = forms.FloatField(required=False, help_text="Drop hits scored below this.")

    def __init__(self, *args: Any, tenants: Sequence[Tenant], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tenant"].queryset = Tenant.objects.filter(pk__in=[t.pk for t in tenants])
        if tenants:
            self.fields["tenant"].initial = tenants[0]

    def clean_filters(self) -> dict[str, object]:
        value = self.cleaned_data.get("filters")
        try:
            return dict(check_filters({} if value in (None, "") else value))
        except (rag.RAGValidationError, rag.RAGTypeError) as exc:
            raise forms.ValidationError(f"{exc.field}: {exc.message}") from None


# --- The search page's filters ---------------------------------------------------------------


class FilterSyntaxError(ValueError):
    pass


def parse_filters(raw: str) -> dict[str, object]:
    """``field = value`` per line (or separated by ``;``); a field given twice matches either value.

    Metadata keeps JSON types, so a value that reads as a number or a boolean matches both
    the text and the typed value (``year = 2024`` finds ``"2024"`` and ``2024``).
    """
    values: dict[str, list[object]] = {}
    for item in re.split(r"[;\n]", raw):
        item = item.strip()
        if not item:
            continue
        field, sep, value = item.partition("=")
        field, value = field.strip(), value.strip()
        if not sep or not field or not value:
            raise FilterSyntaxError(f"“{item}” is not a filter: write field = value.")
        candidates: list[object] = [value]
        if value.lower() in ("true", "false"):
            candidates.append(value.lower() == "true")
        else:
            try:
                number = float(value)
            except ValueError:
                number = math.nan
            if math.isfinite(number):
                candidates.append(int(number) if number.is_integer() and re.fullmatch(r"[+-]?\d+", value) else number)
        bucket = values.setdefault(field, [])
        for candidate in candidates:  # 1 == True in Python, but not in JSON: compare types too
            if not any(type(kept) is type(candidate) and kept == candidate for kept in bucket):
                bucket.append(candidate)
    return {field: vals[0] if len(vals) == 1 else tuple(vals) for field, vals in values.items()}
