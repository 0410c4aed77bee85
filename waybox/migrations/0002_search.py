"""The full-text search table: FTS5 on SQLite, a weighted tsvector with GIN on PostgreSQL."""

from django.db import migrations

SQLITE = """
CREATE VIRTUAL TABLE IF NOT EXISTS waybox_search USING fts5(
    snapshot_id UNINDEXED, url, title, tags, content, tokenize = 'porter unicode61'
)"""

POSTGRES = """
CREATE TABLE IF NOT EXISTS waybox_search (
    snapshot_id text PRIMARY KEY,
    url text NOT NULL DEFAULT '',
    title text NOT NULL DEFAULT '',
    tags text NOT NULL DEFAULT '',
    content text NOT NULL DEFAULT '',
    document tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', coalesce(title, '')), 'A') ||
        setweight(to_tsvector('english', coalesce(tags, '')), 'B') ||
        setweight(to_tsvector('simple', coalesce(url, '')), 'B') ||
        setweight(to_tsvector('english', coalesce(content, '')), 'C')
    ) STORED
);
CREATE INDEX IF NOT EXISTS waybox_search_document ON waybox_search USING GIN (document)"""


def create(apps, schema_editor):
    sql = POSTGRES if schema_editor.connection.vendor == "postgresql" else SQLITE
    for statement in sql.split(";"):
        if statement.strip():
            schema_editor.execute(statement)


def drop(apps, schema_editor):
    schema_editor.execute("DROP TABLE IF EXISTS waybox_search")


class Migration(migrations.Migration):
    dependencies = [("waybox", "0001_initial")]
    operations = [migrations.RunPython(create, drop)]
