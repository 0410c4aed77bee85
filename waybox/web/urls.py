from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import path
from django.views.generic import RedirectView

from waybox.web import files, views

app_name = "waybox"

urlpatterns = [
    path("", views.index, name="index"),
    path("add/", views.add, name="add"),
    path("progress/", views.progress, name="progress"),
    path("progress.json", views.progress_json, name="progress_json"),
    path("snapshot/<uuid:snapshot_id>/", views.snapshot_detail, name="snapshot"),
    path("snapshot/<uuid:snapshot_id>/rerun/", views.snapshot_rerun, name="snapshot_rerun"),
    path("snapshot/<uuid:snapshot_id>/resnapshot/", views.snapshot_resnapshot, name="snapshot_resnapshot"),
    path("snapshot/<uuid:snapshot_id>/delete/", views.snapshot_delete, name="snapshot_delete"),
    path("archive/<uuid:snapshot_id>/", files.serve_archive, name="archive_root"),
    path("archive/<uuid:snapshot_id>/<path:path>", files.serve_archive, name="archive"),
    path("login/", auth_views.LoginView.as_view(template_name="waybox/login.html", redirect_authenticated_user=True),
         name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("setup/", views.first_run, name="setup"),
    path("healthz", views.healthz, name="healthz"),
    path("favicon.ico", RedirectView.as_view(url=static("waybox/icon.svg"), permanent=True)),
]
