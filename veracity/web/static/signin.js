// The sign-in form of a server started with --token: keeps the token as a same-site cookie, then reloads.
document.getElementById("f").addEventListener("submit", function (e) {
  e.preventDefault();
  document.cookie = "veracity_token=" + encodeURIComponent(document.getElementById("t").value) +
    "; path=/; SameSite=Strict" + (location.protocol === "https:" ? "; Secure" : "");
  location.reload();
});
