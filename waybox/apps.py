from django.apps import AppConfig


class WayboxConfig(AppConfig):
    name = "waybox"
    label = "waybox"
    verbose_name = "waybox"
    default_auto_field = "django.db.models.BigAutoField"
