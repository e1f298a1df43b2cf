package blobstore

// TempPrefix is tempPrefix, for the tests of package blobstore_test.
const TempPrefix = tempPrefix
