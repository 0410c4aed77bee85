from __future__ import annotations

import os
from datetime import timedelta

from django.db import models
from django.utils import timezone

from waybox import proc as osproc
from waybox.models.base import Row, queue_index

_MACHINE: dict[int, Machine] = {}
LAST_SEEN_INTERVAL = timedelta(minutes=1)


class Machine(Row):
    """One PID space: a host during one boot, inside one PID namespace.

    `guid` hashes the host's machine-id and hostname with the boot id and the PID
    namespace, so a PID recorded in another container or before a reboot belongs to a
    different Machine and is never taken for a live process here.
    """

    guid = models.CharField(max_length=64, unique=True)
    hostname = models.CharField(max_length=255)
    host_id = models.CharField(max_length=64, help_text="/etc/machine-id, or the hostname when absent.")
    boot_id = models.CharField(max_length=64, blank=True)
    pid_namespace = models.CharField(max_length=64, blank=True)
    os_platform = models.CharField(max_length=255, blank=True)
    cpu_count = models.PositiveIntegerField(default=0)
    memory_total = models.BigIntegerField(default=0)
    last_seen = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.hostname} ({self.guid[:12]})"

    @classmethod
    def current(cls) -> Machine:
        """This PID space's row, created on first use and cached per OS process."""
        cached = _MACHINE.get(os.getpid())
        if cached is not None:
            return cached
        ident = osproc.machine_identity()
        machine, created = cls.objects.get_or_create(
            guid=ident.guid,
            defaults={
                "hostname": ident.hostname,
                "host_id": ident.host_id,
                "boot_id": ident.boot_id,
                "pid_namespace": ident.pid_namespace,
                **osproc.machine_facts(),
            },
        )
        if not created and timezone.now() - machine.last_seen > LAST_SEEN_INTERVAL:
            cls.objects.filter(pk=machine.pk).update(last_seen=timezone.now())
        _MACHINE[os.getpid()] = machine
        return machine


class Binary(Row):
    """An external program a plugin needs, as detected on one Machine."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        INSTALLED = "installed"
        MISSING = "missing"

    machine = models.ForeignKey(Machine, on_delete=models.CASCADE, related_name="binaries")
    name = models.CharField(max_length=128)
    abspath = models.CharField(max_length=1024, blank=True)
    version = models.CharField(max_length=128, blank=True)
    sha256 = models.CharField(max_length=64, blank=True)
    binprovider = models.CharField(max_length=32, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    retry_at = models.DateTimeField(null=True, blank=True, default=timezone.now)

    class Meta:
        indexes = [queue_index("binary")]
        constraints = [models.UniqueConstraint(fields=["machine", "name"], name="binary_once_per_machine")]

    def __str__(self) -> str:
        return f"{self.name} {self.version}".strip()
