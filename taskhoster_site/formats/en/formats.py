"""Dates in the admin as the console writes them: "2026-12-01 19:58:00 UTC", not "Dec. 1, 2026,
7:58 p.m.", so a time copied from one page is found on the other (TIME_ZONE is UTC)."""

DATETIME_FORMAT = "Y-m-d H:i:s T"
SHORT_DATETIME_FORMAT = DATETIME_FORMAT
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = DATE_FORMAT
TIME_FORMAT = "H:i:s"
