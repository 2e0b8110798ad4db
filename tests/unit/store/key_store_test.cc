#include "store/key_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace sandcastle::store {
namespace {

class KeyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("sc-keys-" + std::to_string(getpid()) + "-" +
                                                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    auto ks = KeyStore::open((dir_ / "k.db").string());
    ASSERT_TRUE(ks.ok()) << ks.error().message();
    ks_ = std::move(ks).value();
  }
  void TearDown() override {
    ks_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
  std::unique_ptr<KeyStore> ks_;
};

TEST_F(KeyStoreTest, CreatedKeysVerifyToTheirId) {
  auto a = ks_->create("alice");
  auto b = ks_->create("");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(ks_->verify(a->secret), a->info.id);
  EXPECT_EQ(ks_->verify(b->secret), b->info.id);
  EXPECT_EQ(b->info.name, "key-" + b->info.id);
  EXPECT_EQ(ks_->active_count(), 2u);
}

TEST_F(KeyStoreTest, WrongOrMalformedKeysFail) {
  auto a = ks_->create("alice");
  ASSERT_TRUE(a.ok());
  std::string wrong = a->secret;
  wrong.back() = wrong.back() == 'A' ? 'B' : 'A';
  EXPECT_FALSE(ks_->verify(wrong));
  EXPECT_FALSE(ks_->verify(""));
  EXPECT_FALSE(ks_->verify("sc_"));
  EXPECT_FALSE(ks_->verify("sc_nosuchid_secret"));
  EXPECT_FALSE(ks_->verify("bearer-token"));
}

TEST_F(KeyStoreTest, RevokeByIdOrNameAndListWithoutSecrets) {
  auto a = ks_->create("alice");
  auto b = ks_->create("bob");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(ks_->revoke("alice").ok());
  EXPECT_FALSE(ks_->verify(a->secret));
  EXPECT_TRUE(ks_->verify(b->secret));
  EXPECT_TRUE(ks_->revoke(b->info.id).ok());
  auto again = ks_->revoke("alice");
  EXPECT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kNotFound);
  auto list = ks_->list();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  for (const auto& k : *list) EXPECT_FALSE(k.revoked_at.empty());
  EXPECT_EQ(ks_->active_count(), 0u);
}

TEST_F(KeyStoreTest, KeysSurviveReopening) {
  auto a = ks_->create("alice");
  ASSERT_TRUE(a.ok());
  ks_.reset();
  auto ks = KeyStore::open((dir_ / "k.db").string());
  ASSERT_TRUE(ks.ok());
  EXPECT_EQ((*ks)->verify(a->secret), a->info.id);
}

TEST(ParseKey, Shapes) {
  std::string id, secret;
  EXPECT_TRUE(parse_key("sc_ab12_s3cr_et", &id, &secret));
  EXPECT_EQ(id, "ab12");
  EXPECT_EQ(secret, "s3cr_et");
  EXPECT_FALSE(parse_key("sc__x", &id, &secret));
  EXPECT_FALSE(parse_key("sc_ab12_", &id, &secret));
  EXPECT_FALSE(parse_key("xx_ab12_s", &id, &secret));
}

TEST_F(KeyStoreTest, AdminFlagIsStoredListedAndAuthenticated) {
  auto plain = ks_->create("user");
  auto admin = ks_->create("ops", true);
  ASSERT_TRUE(plain.ok() && admin.ok());
  auto a = ks_->authenticate(admin->secret);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->id, admin->info.id);
  EXPECT_TRUE(a->admin);
  auto p = ks_->authenticate(plain->secret);
  ASSERT_TRUE(p);
  EXPECT_FALSE(p->admin);
  auto list = ks_->list();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  for (const auto& k : *list) EXPECT_EQ(k.admin, k.id == admin->info.id) << k.id;
  // A revoked key is no longer active: its browser sessions end with it.
  EXPECT_TRUE(ks_->find_active(admin->info.id));
  ASSERT_TRUE(ks_->revoke("ops").ok());
  EXPECT_FALSE(ks_->find_active(admin->info.id));
  EXPECT_FALSE(ks_->authenticate(admin->secret));
}

// A database from before the admin column: opening it adds the column, keeps
// the keys working, and none of them becomes an admin.
TEST_F(KeyStoreTest, OldDatabaseIsMigratedWithoutAdmins) {
  const std::string path = (dir_ / "old.db").string();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "CREATE TABLE api_keys (id TEXT PRIMARY KEY, name TEXT NOT NULL, salt BLOB NOT NULL,"
                         " hash BLOB NOT NULL, created_at TEXT NOT NULL, revoked_at TEXT, last_used_at TEXT);"
                         "INSERT INTO api_keys(id, name, salt, hash, created_at) VALUES('abc','old',x'00',x'00',"
                         "'2026-01-01T00:00:00Z')",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  for (int round = 0; round < 2; ++round) {  // the second open finds the column there
    auto ks = KeyStore::open(path);
    ASSERT_TRUE(ks.ok()) << ks.error().message();
    auto list = (*ks)->list();
    ASSERT_TRUE(list.ok()) << list.error().message();
    ASSERT_FALSE(list->empty());
    EXPECT_EQ((*list)[0].id, "abc");
    EXPECT_FALSE((*list)[0].admin);
    auto k = (*ks)->create("new" + std::to_string(round), true);
    ASSERT_TRUE(k.ok()) << k.error().message();
    EXPECT_TRUE((*ks)->authenticate(k->secret)->admin);
  }
}

}  // namespace
}  // namespace sandcastle::store
