//! The scrape-storm demo.
