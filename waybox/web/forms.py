from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password

from waybox.web.actions import MAX_DEPTH

MAX_UPLOAD_BYTES = 50 * 1024 * 1024


class AddForm(forms.Form):
    urls = forms.CharField(
        label="URLs", required=False,
        widget=forms.Textarea(attrs={"rows": 6, "placeholder": "https://example.com\nhttps://example.org/page",
                                     "spellcheck": "false", "autofocus": True}),
        help_text="One per line, or paste a bookmarks export, an RSS feed, JSON…",
    )
    file = forms.FileField(label="…or import a file", required=False,
                           help_text="Browser bookmarks (HTML), RSS/Atom, Pinboard JSON, Pocket CSV, JSONL or text.")
    depth = forms.TypedChoiceField(
        choices=[(0, "0: only these URLs"), (1, "1: and the pages they link to"), (2, "2: two levels deep")]
        + [(n, str(n)) for n in range(3, MAX_DEPTH + 1)],
        coerce=int, initial=0,
    )
    tags = forms.CharField(required=False, help_text="Comma-separated.",
                           widget=forms.TextInput(attrs={"placeholder": "news, research"}))
    plugins = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple,
                                        help_text="None checked: every enabled plugin runs.")

    def __init__(self, *args, plugin_choices: list[tuple[str, str]] = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["plugins"].choices = plugin_choices

    def clean_file(self):
        upload = self.cleaned_data.get("file")
        if upload and upload.size > MAX_UPLOAD_BYTES:
            raise forms.ValidationError(f"the file is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB")
        return upload

    def clean(self):
        data = super().clean()
        if not (data.get("urls") or "").strip() and not data.get("file"):
            raise forms.ValidationError("Give at least one URL, or a file to import.")
        return data

    @property
    def tag_list(self) -> list[str]:
        return [t.strip() for t in self.cleaned_data.get("tags", "").split(",") if t.strip()]


class SetupForm(forms.Form):
    """The first account (a superuser), created from the one-time link `waybox server` prints."""

    username = forms.CharField(max_length=150, widget=forms.TextInput(attrs={"autofocus": True}))
    email = forms.EmailField(required=False)
    password1 = forms.CharField(label="Password", widget=forms.PasswordInput)
    password2 = forms.CharField(label="Password again", widget=forms.PasswordInput)

    def clean(self):
        data = super().clean()
        if data.get("password1") != data.get("password2"):
            raise forms.ValidationError("The two passwords differ.")
        user = get_user_model()(username=data.get("username", ""), email=data.get("email", ""))
        if data.get("password1"):
            validate_password(data["password1"], user)
        return data
