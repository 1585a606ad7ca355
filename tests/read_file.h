// ReadFile: a test's whole-file read, for checking what a tool or a recorder wrote.
#ifndef SLUICE_TESTS_READ_FILE_H_
#define SLUICE_TESTS_READ_FILE_H_

#include <fstream>
#include <sstream>
#include <string>

namespace sluice::testing {

// The file's bytes, or "" when it cannot be opened.
inline std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_READ_FILE_H_
