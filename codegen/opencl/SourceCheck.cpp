// Checks emitted OpenCL C without an OpenCL runtime: libclang parses it as OpenCL C 1.2
// (with clang's OpenCL builtin declarations) and every error is reported with its line.
#include <clang-c/Index.h>

#include <sstream>
#include <vector>

#include "nnc/codegen/OpenCLCodegen.h"

namespace nnc {

Error checkOpenCLSource(const std::string &source, const std::string &what) {
  CXIndex index = clang_createIndex(/*excludeDeclarationsFromPCH=*/0, /*displayDiagnostics=*/0);
  const char *args[] = {"-x", "cl", "-cl-std=CL1.2", "--target=spir64-unknown-unknown",
                        "-Xclang", "-finclude-default-header", "-Xclang",
                        "-fdeclare-opencl-builtins", "-cl-ext=+cl_khr_fp64", "-resource-dir", NNC_CLANG_RESOURCE_DIR, "-isystem", NNC_CLANG_RESOURCE_DIR "/include"};
  CXUnsavedFile file{what.c_str(), source.c_str(), static_cast<unsigned long>(source.size())};
  CXTranslationUnit tu = nullptr;
  CXErrorCode rc = clang_parseTranslationUnit2(index, what.c_str(), args,
                                               static_cast<int>(std::size(args)), &file, 1,
                                               CXTranslationUnit_None, &tu);
  if (rc != CXError_Success || !tu) {
    clang_disposeIndex(index);
    return makeError("{}: libclang could not parse the OpenCL source (error {})", what,
                     static_cast<int>(rc));
  }
  std::vector<std::string> lines;
  {
    std::istringstream in(source);
    for (std::string l; std::getline(in, l);)
      lines.push_back(l);
  }
  std::string errors;
  int count = 0;
  for (unsigned i = 0, n = clang_getNumDiagnostics(tu); i < n; ++i) {
    CXDiagnostic d = clang_getDiagnostic(tu, i);
    CXDiagnosticSeverity sev = clang_getDiagnosticSeverity(d);
    if (sev >= CXDiagnostic_Error) {
      unsigned line = 0, col = 0;
      clang_getSpellingLocation(clang_getDiagnosticLocation(d), nullptr, &line, &col, nullptr);
      CXString msg = clang_getDiagnosticSpelling(d);
      if (count++ < 20) {
        errors += fmt::format("\n{}:{}:{}: error: {}", what, line, col, clang_getCString(msg));
        if (line >= 1 && line <= lines.size())
          errors += "\n    " + lines[line - 1];
      }
      clang_disposeString(msg);
    }
    clang_disposeDiagnostic(d);
  }
  clang_disposeTranslationUnit(tu);
  clang_disposeIndex(index);
  if (count)
    return makeError("{}: {} error(s) in the generated OpenCL C:{}", what, count, errors);
  return Error::success();
}

} // namespace nnc
