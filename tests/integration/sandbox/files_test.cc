// File operations from the server: binary-safe, and confined to the sandbox
// whatever symlinks or ".." the sandbox (or the caller) tries.
#include <gtest/gtest.h>
#include <unistd.h>

#include "fixture.h"

namespace sandcastle::sandbox::testing {
namespace {

class FilesTest : public SandboxTest {};

TEST_F(FilesTest, WriteReadStatListRemoveBinary) {
  std::string data("\0\x01\xff binary\n", 11);
  ASSERT_TRUE(sb_->mkdir("dir/sub").ok());
  ASSERT_TRUE(sb_->write_file("dir/sub/f.bin", data, 0600).ok());
  auto back = sb_->read_file("/workspace/dir/sub/f.bin");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->data, data);
  EXPECT_EQ(back->size, data.size());
  auto st = sb_->stat("dir/sub/f.bin");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->type, FileType::kRegular);
  EXPECT_EQ(st->size, 11u);
  EXPECT_EQ(st->mode, 0600u);
  auto ls = sb_->list("dir");
  ASSERT_TRUE(ls.ok());
  ASSERT_EQ(ls->entries.size(), 1u);
  EXPECT_EQ(ls->entries[0].name, "sub");
  EXPECT_EQ(ls->entries[0].type, FileType::kDirectory);
  // The sandbox user owns what the server wrote.
  auto r = sh("stat -c '%U %a' dir/sub/f.bin; cat dir/sub/f.bin | od -An -c | head -1");
  EXPECT_TRUE(r.stdout_data.starts_with("sandbox 600\n")) << r.stdout_data;
  auto root = sb_->stat("/");
  ASSERT_TRUE(root.ok()) << root.error().message();
  EXPECT_EQ(root->type, FileType::kDirectory);
  EXPECT_EQ(root->name, "/");
  EXPECT_FALSE(sb_->remove("dir").ok());  // not empty
  ASSERT_TRUE(sb_->remove("dir", true).ok());
  EXPECT_EQ(sb_->stat("dir").error().sys_errno, ENOENT);
}

TEST_F(FilesTest, DotDotIsRefused) {
  for (const char* p : {"../etc/passwd", "/workspace/../etc/hostname", "a/../../x"}) {
    auto r = sb_->read_file(p);
    ASSERT_FALSE(r.ok()) << p;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << p;
    EXPECT_FALSE(sb_->write_file(p, "x").ok()) << p;
  }
}

TEST_F(FilesTest, AbsolutePathsAreSandboxPaths) {
  auto passwd = sb_->read_file("/etc/passwd");
  ASSERT_TRUE(passwd.ok()) << passwd.error().message();
  EXPECT_NE(passwd->data.find("sandbox:x:1000:1000"), std::string::npos);
  EXPECT_EQ(passwd->data.find("sandcastle-test"), std::string::npos) << "host passwd leaked";
  auto shadow = sb_->read_file("/etc/shadow");
  ASSERT_FALSE(shadow.ok());
  EXPECT_EQ(shadow.error().sys_errno, ENOENT);
}

TEST_F(FilesTest, SymlinksPlantedInsideStayInside) {
  ASSERT_EQ(sh("ln -s /etc/shadow abs; ln -s ../../../../../../etc/hostname rel; "
               "ln -s / rootlink; ln -s /proc/1/root magic; ln -s /usr/bin usrbin")
                .exit_code,
            0);
  // An absolute target resolves against the sandbox root: no shadow there.
  EXPECT_EQ(sb_->read_file("abs").error().sys_errno, ENOENT);
  // ".." inside a symlink cannot climb above the sandbox root.
  auto host = sb_->read_file("rel");
  ASSERT_TRUE(host.ok()) << host.error().message();
  EXPECT_EQ(host->data, "sandbox\n");
  EXPECT_EQ(sb_->read_file("rootlink/etc/shadow").error().sys_errno, ENOENT);
  // /proc/1/root is closed to the sandbox user (init is not dumpable), and
  // magic links are refused anyway.
  EXPECT_EQ(sb_->read_file("magic/etc/passwd").error().sys_errno, EACCES);
  // Writing through a link into the read-only /usr fails with EROFS.
  auto w = sb_->write_file("usrbin/evil", "x");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().sys_errno, EROFS);
}

TEST_F(FilesTest, KernelFilesystemsAreOffLimits) {
  EXPECT_EQ(sb_->read_file("/proc/1/environ").error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(sb_->write_file("/dev/null", "x").error().code, ErrorCode::kPermissionDenied);
}

TEST_F(FilesTest, HostOnlyReadableFilesStayUnreadable) {
  // /etc/ssl is bound from the host; its private/ directory is root-only.
  auto r = sb_->list("/etc/ssl/private");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().sys_errno, EACCES);
}

TEST_F(FilesTest, RenameReplacesAFile) {
  ASSERT_TRUE(sb_->write_file("a", "old").ok());
  ASSERT_TRUE(sb_->write_file(".a.upload-1", "new", 0600).ok());
  auto r = sb_->rename(".a.upload-1", "/workspace/a");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(sb_->read_file("a")->data, "new");
  EXPECT_EQ(sb_->stat("a")->mode, 0600u);
  EXPECT_EQ(sb_->stat(".a.upload-1").error().sys_errno, ENOENT);
  // A missing source is its errno; the target is left as it was.
  auto gone = sb_->rename("nothing", "a");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().sys_errno, ENOENT);
  EXPECT_EQ(sb_->read_file("a")->data, "new");
  EXPECT_EQ(sb_->rename("a", "/").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(sb_->rename("a", "/proc/x").error().code, ErrorCode::kPermissionDenied);
}

// Rename replaces files only: never a directory, and a directory is not moved.
TEST_F(FilesTest, RenameOntoADirectoryIsEisdir) {
  ASSERT_TRUE(sb_->mkdir("d").ok());
  ASSERT_TRUE(sb_->mkdir("empty").ok());
  ASSERT_TRUE(sb_->write_file("d/keep", "k").ok());
  ASSERT_TRUE(sb_->write_file("f", "x").ok());
  for (const char* to : {"d", "empty"}) {
    auto r = sb_->rename("f", to);
    ASSERT_FALSE(r.ok()) << to;
    EXPECT_EQ(r.error().code, ErrorCode::kSystem) << to;
    EXPECT_EQ(r.error().sys_errno, EISDIR) << to;
    EXPECT_EQ(sb_->stat(to)->type, FileType::kDirectory) << to;
  }
  EXPECT_EQ(sb_->read_file("f")->data, "x");
  auto dir = sb_->rename("d", "moved");
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.error().sys_errno, EISDIR);
  EXPECT_EQ(sb_->read_file("d/keep")->data, "k");
}

// The new name's parent is resolved inside the sandbox: a symlink there
// leads to the sandbox's own tree, never the host's, and magic links are
// refused.
TEST_F(FilesTest, RenameThroughASymlinkedParentStaysInside) {
  // A directory only the sandbox has: the host has no such path, so a rename
  // resolved on the host could not land there.
  const std::string dir = "/workspace/sc-target-" + std::to_string(::getpid());
  const std::string name = "moved";
  ASSERT_NE(::access(dir.c_str(), F_OK), 0);
  ASSERT_EQ(sh("mkdir " + dir + "; ln -s " + dir + " abs; ln -s ../../../../../.." + dir +
               " rel; ln -s /proc/self/cwd magic")
                .exit_code,
            0);
  for (const char* link : {"abs", "rel"}) {
    ASSERT_TRUE(sb_->write_file("src", link).ok());
    auto r = sb_->rename("src", std::string(link) + "/" + name);
    ASSERT_TRUE(r.ok()) << link << ": " << r.error().message();
    auto inside = sb_->read_file(dir + "/" + name);
    ASSERT_TRUE(inside.ok()) << link;
    EXPECT_EQ(inside->data, link);
    EXPECT_EQ(sb_->stat("src").error().sys_errno, ENOENT);
  }
  EXPECT_NE(::access(dir.c_str(), F_OK), 0) << "reached the host's tree";
  ASSERT_TRUE(sb_->write_file("src", "m").ok());
  auto magic = sb_->rename("src", "magic/" + name);
  ASSERT_FALSE(magic.ok());
  EXPECT_EQ(magic.error().sys_errno, ELOOP);
  EXPECT_EQ(sb_->read_file("src")->data, "m");
}

TEST_F(FilesTest, DiskLimitAppliesToWrites) {
  SpecOptions o;
  o.limits.disk_bytes = 2 * kMiB;
  auto small = make(o);
  ASSERT_NE(small, nullptr);
  auto w = small->write_file("big", std::string(4 * kMiB, 'x'));
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().sys_errno, ENOSPC);
  EXPECT_TRUE(small->destroy().ok());
}

}  // namespace
}  // namespace sandcastle::sandbox::testing
