"""Runtimes shared by every stage: the Spark session, Ray, and the one-time machine set-up."""
