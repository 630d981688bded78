package ui

// StatusSQL exposes statusSQL to the tests of package ui_test.
const StatusSQL = statusSQL
