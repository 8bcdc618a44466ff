// report.js: filled in by the front end
