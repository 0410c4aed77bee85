def archive_in_foreground(app, crawl) -> int:
    return 0
